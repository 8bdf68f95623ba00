package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeBlock is one fenced code block of the README.
type readmeBlock struct {
	lang string
	text string
	line int // of the opening fence
}

// readmeBlocks returns the README's fenced code blocks in order.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	var blocks []readmeBlock
	var cur *readmeBlock
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{lang: strings.TrimPrefix(line, "```"), line: i + 1}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	require.Nil(t, cur, "an unclosed code block in the README")
	return blocks
}

// envPrefix matches the variable assignments in front of a command.
var envPrefix = regexp.MustCompile(`^(\w+=("[^"]*"|'[^']*'|\S*)\s+)*`)

// readmeSkip says why a README command is not run here: it needs a network, a login or
// a client this machine does not have, or it is a test suite, or it is none of the
// onboarding commands this test knows to run (mcp-aggregator, go build, and the shell's
// file commands).
func readmeSkip(cmd string) string {
	fields := strings.Fields(envPrefix.ReplaceAllString(cmd, ""))
	if len(fields) == 0 {
		return ""
	}
	switch prog := fields[0]; {
	case prog == "mcp-aggregator", prog == "mkdir", prog == "cat", prog == "cp", prog == "echo", prog == "printf", prog == "ls":
		return ""
	case prog == "go" && len(fields) > 1 && fields[1] == "build":
		return ""
	case prog == "claude" || prog == "gemini" || prog == "codex" || prog == "code":
		return "needs that client, installed and logged in"
	case prog == "npx":
		return "downloads a package"
	case prog == "go" && len(fields) > 1 && fields[1] == "install":
		return "downloads the module"
	case prog == ".ci/run" || prog == "go" && len(fields) > 1 && fields[1] == "test":
		return "runs a test suite"
	default:
		return "not an onboarding command"
	}
}

// serves reports whether a command starts a server that runs until stopped.
func serves(cmd string) bool {
	return strings.HasPrefix(envPrefix.ReplaceAllString(cmd, ""), "mcp-aggregator ") && strings.Contains(cmd, "--http")
}

// TestOnboardingREADME runs the README's shell commands as a new user would, in order,
// in a fresh home directory: the build from a checkout, then every command that needs
// no network and no login. A command that starts a server runs until it says where it
// listens. The JSON and TOML snippets must parse, and have the shape client-config prints.
func TestOnboardingREADME(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	home := t.TempDir()
	work := t.TempDir()
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	marker := newMarker()
	env := markerEnv(marker,
		"HOME="+home,
		"PATH="+filepath.Join(home, ".local", "bin")+string(filepath.ListSeparator)+os.Getenv("PATH"),
		// The build uses this machine's module and build caches, and must not fetch.
		"GOPATH="+goEnv("GOPATH"), "GOMODCACHE="+goEnv("GOMODCACHE"), "GOCACHE="+goEnv("GOCACHE"),
		"GOPROXY=off",
		"MCP_AGGREGATOR_CONFIG=")

	ran := 0
	for _, b := range readmeBlocks(t) {
		switch b.lang {
		case "sh":
		case "json":
			require.True(t, json.Valid([]byte(b.text)), "README line %d: the JSON snippet does not parse", b.line)
			var v map[string]map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			}
			if json.Unmarshal([]byte(b.text), &v) != nil {
				continue // not a client snippet
			}
			for _, servers := range v {
				if s, ok := servers["mcp-aggregator"]; ok {
					assert.True(t, filepath.IsAbs(s.Command), "README line %d: the command is an absolute path", b.line)
					assert.Equal(t, []string{"serve", "--config"}, s.Args[:2], "README line %d", b.line)
					assert.True(t, filepath.IsAbs(s.Args[2]), "README line %d: the config is an absolute path", b.line)
				}
			}
			continue
		case "toml":
			assert.Contains(t, b.text, "[mcp_servers.mcp-aggregator]\ncommand = \"/", "README line %d", b.line)
			continue
		default:
			continue
		}
		for _, cmd := range readmeCommands(b.text) {
			first := strings.SplitN(cmd, "\n", 2)[0]
			if why := readmeSkip(first); why != "" {
				t.Logf("README line %d: not run here (%s): %s", b.line, why, first)
				continue
			}
			ran++
			dir := work
			if strings.HasPrefix(first, "go build") {
				dir = repo // "from a checkout of this repository"
			}
			if serves(first) {
				readmeServe(t, dir, env, cmd, b.line)
				continue
			}
			out, err := readmeRun(dir, env, cmd)
			require.NoError(t, err, "README line %d: %s\n%s", b.line, first, out)
			t.Logf("README line %d: %s\n%s", b.line, first, out)
		}
	}
	assert.GreaterOrEqual(t, ran, 8, "the README's commands were found and run")
	assertNoSurvivors(t, marker)

	// What the README promises of the commands it ran.
	out, err := readmeRun(work, env, "mcp-aggregator check --config mcp-aggregator.yaml")
	require.NoError(t, err, out)
	assert.Contains(t, out, "read as mcp-aggregator YAML, 1 server(s)", "import wrote the config check reads")
}

// readmeCommands splits a shell block into commands: one per line, a here-document
// staying with the command that opens it.
func readmeCommands(text string) []string {
	var cmds []string
	heredoc := regexp.MustCompile(`<<'?(\w+)'?`)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if m := heredoc.FindStringSubmatch(line); m != nil {
			for i+1 < len(lines) {
				i++
				line += "\n" + lines[i]
				if lines[i] == m[1] {
					break
				}
			}
		}
		cmds = append(cmds, line)
	}
	return cmds
}

// readmeRun runs one command with bash in dir and returns its output.
func readmeRun(dir string, env []string, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*startTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", cmd)
	c.Dir, c.Env = dir, env
	out, err := c.CombinedOutput()
	return string(out), err
}

// readmeServe starts a serving command, waits until it logs where it listens, then
// stops it with SIGTERM and expects a clean exit. It listens on a free port rather than
// the README's, which may be taken on this machine.
func readmeServe(t *testing.T, dir string, env []string, cmd string, line int) {
	t.Helper()
	cmd = regexp.MustCompile(`--http 127\.0\.0\.1:\d+`).ReplaceAllString(cmd, "--http 127.0.0.1:0")
	c := exec.Command("bash", "-c", "exec "+cmd)
	c.Dir, c.Env = dir, env
	stderr, err := c.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	listening := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "msg=listening") {
				listening <- sc.Text()
			}
		}
		close(listening)
		_, _ = io.Copy(io.Discard, stderr)
	}()
	got, ok := <-listening
	require.True(t, ok, "README line %d: %q never listened", line, cmd)
	assert.Regexp(t, `url=http://127\.0\.0\.1:\d+/mcp`, got)
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	for range listening { // drain until stderr closes
	}
	assert.NoError(t, c.Wait(), "README line %d: %q did not stop cleanly:\n%s", line, cmd, log.String())
}
