package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// onboardingPages are the pages a newcomer follows, in the order the README sends them
// there: the README itself, then the client snippets, then the configuration page (whose
// "Configs you already have" section imports another client's config).
var onboardingPages = []string{"README.md", "docs/clients.md", "docs/configuration.md"}

// readmeBlock is one fenced code block of an onboarding page.
type readmeBlock struct {
	lang string
	text string
	at   string // the page and the line of the opening fence, "README.md line 12"
}

// readmeBlocks returns the fenced code blocks of the onboarding pages, in order.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	for _, page := range onboardingPages {
		data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(page)))
		require.NoError(t, err)
		var cur *readmeBlock
		for i, line := range strings.Split(string(data), "\n") {
			switch {
			case cur == nil && strings.HasPrefix(line, "```"):
				cur = &readmeBlock{lang: strings.TrimPrefix(line, "```"), at: fmt.Sprintf("%s line %d", page, i+1)}
			case cur != nil && line == "```":
				blocks = append(blocks, *cur)
				cur = nil
			case cur != nil:
				cur.text += line + "\n"
			}
		}
		require.Nil(t, cur, "an unclosed code block in %s", page)
	}
	return blocks
}

// envPrefix matches the variable assignments in front of a command.
var envPrefix = regexp.MustCompile(`^(\w+=("[^"]*"|'[^']*'|\S*)\s+)*`)

// readmeSkip says why a command of an onboarding page is not run here: it needs a network, a login or
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

// TestOnboardingREADME runs the shell commands of the README and of the onboarding pages
// it links as a new user would, in order,
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
			require.True(t, json.Valid([]byte(b.text)), "%s: the JSON snippet does not parse", b.at)
			var v map[string]map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			}
			if json.Unmarshal([]byte(b.text), &v) != nil {
				continue // not a client snippet
			}
			for _, servers := range v {
				if s, ok := servers["mcp-aggregator"]; ok {
					assert.True(t, filepath.IsAbs(s.Command), "%s: the command is an absolute path", b.at)
					assert.Equal(t, []string{"serve", "--config"}, s.Args[:2], b.at)
					assert.True(t, filepath.IsAbs(s.Args[2]), "%s: the config is an absolute path", b.at)
				}
			}
			continue
		case "toml":
			assert.Contains(t, b.text, "[mcp_servers.mcp-aggregator]\ncommand = \"/", b.at)
			continue
		default:
			continue
		}
		for _, cmd := range readmeCommands(b.text) {
			first := strings.SplitN(cmd, "\n", 2)[0]
			if why := readmeSkip(first); why != "" {
				t.Logf("%s: not run here (%s): %s", b.at, why, first)
				continue
			}
			ran++
			dir := work
			if strings.HasPrefix(first, "go build") {
				dir = repo // "from a checkout of this repository"
			}
			if serves(first) {
				readmeServe(t, dir, env, cmd, b.at)
				continue
			}
			out, err := readmeRun(dir, env, cmd)
			require.NoError(t, err, "%s: %s\n%s", b.at, first, out)
			t.Logf("%s: %s\n%s", b.at, first, out)
		}
	}
	assert.GreaterOrEqual(t, ran, 8, "the onboarding pages' commands were found and run")
	assertNoSurvivors(t, marker)

	// What the configuration page promises of the commands it ran.
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
// the page's, which may be taken on this machine.
func readmeServe(t *testing.T, dir string, env []string, cmd string, at string) {
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
	require.True(t, ok, "%s: %q never listened", at, cmd)
	assert.Regexp(t, `url=http://127\.0\.0\.1:\d+/mcp`, got)
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	for range listening { // drain until stderr closes
	}
	assert.NoError(t, c.Wait(), "%s: %q did not stop cleanly:\n%s", at, cmd, log.String())
}
