package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliResult is what one run of a subcommand produced.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the binary with args in a fresh directory and waits for it; a command that
// starts upstreams must leave none of them running.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIIn(t, t.TempDir(), nil, args...)
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "version")
	assert.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Regexp(t, `^mcp-aggregator \S+\n$`, res.stdout)
}

// catalogEntry is one tool of `tools --json`.
type catalogEntry struct {
	Name     string `json:"name"`
	Server   string `json:"server"`
	Original string `json:"original"`
}

// catalogOutput is the whole output of `tools --json`.
type catalogOutput struct {
	Tools    []catalogEntry `json:"tools"`
	Problems []string       `json:"problems"`
	Notes    []string       `json:"notes"`
}

func TestCLITools(t *testing.T) {
	t.Parallel()
	good := `version: 1
servers:
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
    tools: {whitelist: [echo, add]}
  fid:
    truely-stateless: true
    ` + demoServer("fidelity") + `
    transform: [{prefix: fx_}, {suffix: _v2}]
    tools: {blacklist: ['*_tool', 'progress_*', kitchen_sink]}
`
	wantTools := []catalogEntry{
		{"mcp_release", "mcp_admin", "mcp_release"},
		{"mcp_status", "mcp_admin", "mcp_status"},
		{"demo_echo", "demo", "echo"},
		{"demo_add", "demo", "add"},
		{"fx_no_annotations_v2", "fid", "no_annotations"},
		{"fx_empty_schema_v2", "fid", "empty_schema"},
		{"fx_rich_v2", "fid", "rich"},
		{"fx_broken_v2", "fid", "broken"},
	}

	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "tools", "--json", "--config", writeConfig(t, good))
		assert.Equal(t, 0, res.code, "stderr: %s", res.stderr)
		var out catalogOutput
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), "stdout: %s", res.stdout)
		assert.ElementsMatch(t, wantTools, out.Tools)
		if assert.GreaterOrEqual(t, len(out.Tools), 2) {
			assert.Equal(t, wantTools[:2], out.Tools[:2], "admin tools come first")
		}
		// Tools the filters drop are what the config asked for: a note per server.
		assert.True(t, anyContains(out.Notes, `server "demo"`, "excluded by tools.whitelist", "big"),
			"the dropped tool is reported: %q", out.Notes)
		assert.True(t, anyContains(out.Notes, `server "fid"`, "excluded by tools.blacklist", "kitchen_sink"),
			"the dropped tool is reported: %q", out.Notes)
		for _, p := range out.Problems {
			assert.False(t, strings.HasPrefix(p, "error:"), "unexpected error %q", p)
		}
	})

	t.Run("failing server", func(t *testing.T) {
		t.Parallel()
		ghost := t.TempDir() + "/no-such-mcp-server"
		res := runCLI(t, "tools", "--json", "--config", writeConfig(t, good+`  ghost:
    command: `+quoted(ghost)+`
`))
		assert.Equal(t, 1, res.code, "an upstream that cannot start is an error; stderr: %s", res.stderr)
		var out catalogOutput
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), "stdout: %s", res.stdout)
		assert.ElementsMatch(t, wantTools, out.Tools, "the other servers are listed all the same")
		assert.True(t, anyContains(out.Problems, "error:", `server "ghost"`, ghost),
			"the failure names the server and its command: %q", out.Problems)
	})
}

// anyContains reports whether one of lines contains every one of parts.
func anyContains(lines []string, parts ...string) bool {
	for _, l := range lines {
		if containsAll(l, parts...) {
			return true
		}
	}
	return false
}

// Variables the config tests refer to and that must not be set.
const (
	unsetVarA = "MCP_AGGREGATOR_INTEGRATION_UNSET_A"
	unsetVarB = "MCP_AGGREGATOR_INTEGRATION_UNSET_B"
)

func TestCLICheck(t *testing.T) {
	t.Parallel()
	for _, name := range []string{unsetVarA, unsetVarB} {
		_, set := os.LookupEnv(name)
		require.False(t, set, "%s must not be set for this test", name)
	}

	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "check", "--config", writeConfig(t, `version: 1
servers:
  local:
    `+demoServer("tools")+`
    connect_timeout: 10s
    request_timeout: PT1M
    transform: [{prefix: {remove: 'x_', add: 'local_'}}, {suffix: '_1'}]
    tools: {mode: dynamic, whitelist: ['*']}
  remote:
    url: https://example.com/mcp
    headers: {X-Mode: test}
  loopback:
    url: http://127.0.0.1:9/mcp
`))
		assert.Equal(t, 0, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
		assert.Contains(t, res.stdout, "ok: 3 server(s), 0 warning(s)")
	})

	// Each config has one mistake; check must exit 1 with an error line that gives
	// the file and line, the server and the field at fault.
	for _, tc := range []struct {
		name   string
		config string
		want   []string // parts of one error line, after "error: FILE:LINE: "
		line   int
	}{
		{"invalid YAML", "version: 1\nservers:\n  a: [unclosed\n", []string{"invalid YAML"}, 3},
		{"missing version", "servers:\n  a:\n    command: x\n", []string{"version:", "required"}, 1},
		{"own keys in JSON without version", `{"servers": {"a": {"command": "x", "transform": [{"prefix": "a_"}], "truely-stateless": true, "tools": {"whitelist": ["read_*"]}}}}`,
			[]string{"version:", "required", "servers.a.transform", `add "version": 1`}, 1},
		{"duplicate ids", "version: 1\nservers:\n  twin:\n    command: a\n  twin:\n    command: b\n",
			[]string{`"twin"`, "already defined"}, 5},
		{"transport websocket", "version: 1\nservers:\n  ws:\n    transport: websocket\n    url: wss://example.com/mcp\n",
			[]string{`server "ws"`, "transport:", `"websocket" is not supported`}, 4},
		{"stdio without command", "version: 1\nservers:\n  nocmd:\n    args: [x]\n",
			[]string{`server "nocmd"`, "command:", "required"}, 3},
		{"http without url", "version: 1\nservers:\n  nourl:\n    transport: http\n",
			[]string{`server "nourl"`, "url:", "required"}, 3},
		{"missing env var", "version: 1\nservers:\n  tok:\n    command: x\n    env:\n      TOKEN: {env: " + unsetVarA + "}\n",
			[]string{`server "tok"`, "env.TOKEN:", unsetVarA, "not set"}, 6},
		{"missing interpolated var", "version: 1\nservers:\n  interp:\n    command: x\n    args: ['--key=${" + unsetVarB + "}']\n",
			[]string{`server "interp"`, "args[0]:", unsetVarB, "not set"}, 5},
		{"plain http to a remote host", "version: 1\nservers:\n  remote:\n    url: http://example.com/mcp\n",
			[]string{`server "remote"`, "url:", "insecure: true"}, 4},
		{"bad duration", "version: 1\nservers:\n  slowpoke:\n    command: x\n    connect_timeout: soon\n",
			[]string{`server "slowpoke"`, "connect_timeout:", "duration"}, 5},
		{"unknown transform", "version: 1\nservers:\n  renamer:\n    command: x\n    transform: [{rename: y_}]\n",
			[]string{`server "renamer"`, "transform", `unknown transform "rename"`}, 5},
		{"unknown tools mode", "version: 1\nservers:\n  picky:\n    command: x\n    tools: {mode: lenient}\n",
			[]string{`server "picky"`, "tools.mode:", `"lenient"`}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := writeConfig(t, tc.config)
			res := runCLI(t, "check", "--config", file)
			assert.Equal(t, 1, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			prefix := fmt.Sprintf("error: %s:%d: ", file, tc.line)
			found := false
			for _, line := range strings.Split(res.stdout, "\n") {
				if strings.HasPrefix(line, prefix) && containsAll(line, tc.want...) {
					found = true
				}
			}
			assert.True(t, found, "no line %q... containing %q in:\n%s", prefix, tc.want, res.stdout)
			assert.Regexp(t, regexp.MustCompile(`(?m)^1 error\(s\), \d+ warning\(s\)$`), res.stdout)
		})
	}
}

// TestCLIToolsTableIsInert: `tools` prints an upstream's descriptions, and
// problems that quote what it sent (a tool's name), to the operator's
// terminal, so their escape sequences and control characters (which could
// clear the screen, retitle the window or write the clipboard) are printed
// as visible escapes, not sent to the terminal.
func TestCLIToolsTableIsInert(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "tools", "--config", writeConfig(t, `version: 1
servers:
  esc:
    truely-stateless: true
    `+demoServer("misbehave", "escapes")+`
`))
	assert.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.NotContains(t, res.stdout, "\x1b")
	assert.NotContains(t, res.stdout, "\x07")
	assert.NotContains(t, res.stdout, "\u009b")
	assert.NotContains(t, res.stdout, "\r")
	assert.Contains(t, res.stdout, `\x1b[2J\x1b]0;owned\x07Clears\tthe\u009bscreen\rfor you`)
	assert.Contains(t, res.stdout, `(its inputSchema is missing): \x1b[31mred`)
}
