package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCLIIn runs the binary with args in dir, with more environment, and waits for it;
// nothing it started may outlive it.
func runCLIIn(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+stopTimeout)
	defer cancel()
	marker := newMarker()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = markerEnv(marker, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		res.code = exitErr.ExitCode()
	} else {
		require.NoError(t, err, "running %v", args)
	}
	assertNoSurvivors(t, marker)
	return res
}

// writeFile writes text to dir/name, creating directories, and returns the path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// dialectFixture is one client's config file, as that client's users write it, whose
// server is a demo upstream of the built binary.
type dialectFixture struct {
	name    string
	file    string // path under the fixture's directory
	dialect string // as check names it
	text    string
	env     []string          // the aggregator's environment
	tools   []string          // exported names that must be listed
	absent  []string          // exported names that must not be
	calls   map[string]string // env tool variable -> the value the server must see
	call    string            // the tool to call with calls (default "env")
	broken  string            // the same file with one mistake
	line    int               // where check reports it
	parts   []string          // in the error line
	unset   bool              // the mistake is only a variable not set yet (or its env file not there)
}

// dialectFixtures are the configs of every client format the aggregator reads. url is
// a streamable-HTTP MCP endpoint for the formats that only know remote servers.
func dialectFixtures(t *testing.T, url string) []dialectFixture {
	bin := quoted(binary)
	stdio := `"command": ` + bin + `, "args": ["demo-server", "tools"]`
	return []dialectFixture{
		{
			name: "claude-desktop", file: "claude_desktop_config.json", dialect: "mcpServers JSON",
			text: `{
  "mcpServers": {
    "demo": {
      ` + stdio + `,
      "env": {"DEMO_TOKEN": "from-claude-desktop"}
    }
  },
  "globalShortcut": "Alt+Space"
}
`,
			tools: []string{"echo", "env"}, calls: map[string]string{"DEMO_TOKEN": "from-claude-desktop"},
			broken: "{\n  \"mcpServers\": {\n    \"demo\": {\n      " + stdio + ",\n      \"env\": {\"TOKEN\": \"${ONB_NOT_SET_ANYWHERE}\"}\n    }\n  }\n}\n",
			line:   5, parts: []string{`server "demo"`, "env.TOKEN:", "ONB_NOT_SET_ANYWHERE", "not set"}, unset: true,
		},
		{
			name: "claude-code", file: ".mcp.json", dialect: "mcpServers JSON",
			text:  `{"mcpServers": {"demo": {"type": "stdio", ` + stdio + `, "env": {"DEMO_TOKEN": "${ONB_UNSET_TOKEN:-from-claude-code}"}}}}`,
			tools: []string{"echo"}, calls: map[string]string{"DEMO_TOKEN": "from-claude-code"},
			broken: "{\"mcpServers\": {\n  \"ws\": {\n    \"type\": \"websocket\",\n    \"url\": \"wss://example.com/ws\"\n  }\n}}\n",
			line:   3, parts: []string{`server "ws"`, "type:", `"websocket" is not supported`},
		},
		{
			name: "cursor", file: ".cursor/mcp.json", dialect: "mcpServers JSON",
			text:  `{"mcpServers": {"demo": {` + stdio + `, "env": {"DEMO_TOKEN": "${env:ONB_CURSOR_TOKEN}", "DEMO_DIR": "${workspaceFolder}"}}}}`,
			env:   []string{"ONB_CURSOR_TOKEN=from-cursor-env"},
			tools: []string{"echo"}, calls: map[string]string{"DEMO_TOKEN": "from-cursor-env", "DEMO_DIR": "<workspace>"},
			broken: "{\"mcpServers\": {\n  \"demo\": {\n    \"command\": \"x\"\n    \"args\": []\n  }\n}}\n",
			line:   4, parts: []string{"invalid JSON"},
		},
		{
			name: "gemini", file: ".gemini/settings.json", dialect: "mcpServers JSON",
			text:  `{"theme": "GitHub", "mcpServers": {"demo": {` + stdio + `, "includeTools": ["echo", "env", "add"], "excludeTools": ["add"], "trust": true}}}`,
			tools: []string{"echo", "env"}, absent: []string{"add", "pid"}, calls: map[string]string{"PATH": "<any>"},
			broken: "{\"mcpServers\": {\n  \"remote\": {\n    \"httpUrl\": \"http://example.com/mcp\"\n  }\n}}\n",
			line:   3, parts: []string{`server "remote"`, "httpUrl:", "insecure: true"},
		},
		{
			name: "vscode", file: ".vscode/mcp.json", dialect: "VS Code mcp.json",
			text: `{
  // VS Code's own comments and trailing commas
  "inputs": [{"type": "promptString", "id": "onb-token", "description": "A token", "password": true}],
  "servers": {
    "demo": {"type": "stdio", ` + stdio + `, "env": {"DEMO_TOKEN": "${input:onb-token}"},},
  },
}
`,
			env:   []string{"ONB_TOKEN=from-vscode-input"},
			tools: []string{"echo"}, calls: map[string]string{"DEMO_TOKEN": "from-vscode-input"},
			broken: "{\n  \"servers\": {\n    \"demo\": {\"type\": \"stdio\", \"command\": \"x\",\n      \"envFile\": \"${workspaceFolder}/missing.env\"}\n  }\n}\n",
			line:   4, parts: []string{`server "demo"`, "envFile:", "does not exist"}, unset: true,
		},
		{
			name: "tenex", file: ".tenex/mcp.json", dialect: "TENEX mcp.json",
			text:  `{"servers": {"demo": {` + stdio + `, "description": "demo tools", "env": {"DEMO_TOKEN": "from-tenex"}}}, "enabled": true}`,
			tools: []string{"echo"}, calls: map[string]string{"DEMO_TOKEN": "from-tenex"},
			broken: "{\"servers\": {\n  \"demo\": {\n    \"args\": [\"x\"]\n  }\n}}\n",
			line:   2, parts: []string{`server "demo"`, "command:", "required"},
		},
		{
			name: "holodeck", file: "agent.yaml", dialect: "HoloDeck agent.yaml",
			text: `name: research-agent
model: {provider: openai, name: gpt-4o}
tools:
  - name: search_docs
    type: vectorstore
    source: docs/
  - name: demo
    description: Demo tools
    type: mcp
    server: demo-tools
    command: ` + bin + `
    args: [demo-server, tools]
    env: {DEMO_TOKEN: from-holodeck}
    request_timeout: 30
`,
			tools: []string{"echo"}, calls: map[string]string{"DEMO_TOKEN": "from-holodeck"},
			broken: "tools:\n  - name: demo\n    type: mcp\n    command: x\n    request_timeout: soon\n",
			line:   5, parts: []string{`server "demo"`, "request_timeout:", `"soon" is not a valid duration`},
		},
		{
			name: "chatagent", file: "config.yaml", dialect: "chatagent config",
			text: `myai:
  toolbox:
    max_concurrent: 10
    tools:
      - {name: demo_echo, max_instances: 2, timeout: P0DT0H0M30S}
    mcps:
      - name: remote
        url: ` + url + `
        transport: streamable_http
        mode: dynamic
        default_tool_config: {max_instances: 4, timeout: P0DT0H0M30S}
        prompts: []
`,
			tools: []string{"demo_echo", "counter_get"}, call: "demo_echo",
			broken: "mcps:\n  - name: remote\n    url: https://example.com/mcp\n    mode: permissive\n",
			line:   4, parts: []string{`server "remote"`, "mode:", `"permissive" is not a mode`},
		},
	}
}

// TestOnboardingDialects: the config of every client format is read by --config as it
// is, served (its server's tools listed and called, its env values delivered), its
// mistakes reported at their file and line, and imported to YAML that serves the same.
func TestOnboardingDialects(t *testing.T) {
	t.Parallel()
	remote := startAggregator(t, httpTransport, aggregatorOptions{}) // the demo, over HTTP
	remote.waitLoaded()
	for _, fx := range dialectFixtures(t, remote.url) {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := writeFile(t, dir, fx.file, fx.text)

			res := runCLIIn(t, dir, fx.env, "check", "--config", path)
			assert.Equal(t, 0, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			assert.Contains(t, res.stdout, path+": read as "+fx.dialect)
			assert.NotContains(t, res.stdout, "error:")

			t.Run("served", func(t *testing.T) {
				a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{path}, env: fx.env})
				c := a.connect()
				a.waitLoaded()
				names := toolNames(t, c.listTools())
				for _, want := range fx.tools {
					assert.Contains(t, names, want)
				}
				for _, absent := range fx.absent {
					assert.NotContains(t, names, absent)
				}
				tool := fx.call
				if tool == "" {
					tool = "env"
				}
				if tool == "demo_echo" {
					assert.Equal(t, "through chatagent", firstText(t, c.callToolResult(tool, map[string]any{"text": "through chatagent"})))
				}
				for name, want := range fx.calls {
					got := firstText(t, c.callToolResult(tool, map[string]any{"name": name}))
					switch want {
					case "<any>":
						assert.NotEmpty(t, got, name)
					case "<workspace>":
						assert.Equal(t, dir, got, "${workspaceFolder} is the folder holding .cursor")
					default:
						assert.Equal(t, want, got, name)
					}
				}
			})

			t.Run("mistake at its line", func(t *testing.T) {
				bdir := t.TempDir()
				broken := writeFile(t, bdir, fx.file, fx.broken)
				res := runCLIIn(t, bdir, nil, "check", "--config", broken)
				assert.Equal(t, 1, res.code, "stdout: %s", res.stdout)
				prefix := fmt.Sprintf("error: %s:%d: ", broken, fx.line)
				found := false
				for _, line := range strings.Split(res.stdout, "\n") {
					found = found || strings.HasPrefix(line, prefix) && containsAll(line, fx.parts...)
				}
				assert.True(t, found, "no line %q... with %q in:\n%s", prefix, fx.parts, res.stdout)
			})

			t.Run("mistake imported", func(t *testing.T) {
				// A variable not set yet is a warning, and the config is written; any
				// other mistake writes nothing and exits 1, saying what it is.
				bdir := t.TempDir()
				broken := writeFile(t, bdir, fx.file, fx.broken)
				res := runCLIIn(t, bdir, nil, "import", broken)
				lines := stderrLines(res.stderr)
				what := fx.parts[len(fx.parts)-1]
				if fx.unset {
					assert.Equal(t, 0, res.code, "stderr: %s", res.stderr)
					assert.True(t, strings.HasPrefix(res.stdout, "# mcp-aggregator config, written by `mcp-aggregator import`"), res.stdout)
					assert.NotContains(t, res.stderr, "error:")
					assert.True(t, slices.ContainsFunc(lines, func(l string) bool {
						return strings.HasPrefix(l, "warning: ") && containsAll(l, fx.parts[0], what)
					}), "no warning with %q and %q in:\n%s", fx.parts[0], what, res.stderr)
					return
				}
				assert.Equal(t, 1, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
				assert.Empty(t, res.stdout)
				assert.True(t, slices.ContainsFunc(lines, func(l string) bool {
					return strings.HasPrefix(l, "error: ") && strings.Contains(l, what)
				}), "no error with %q in:\n%s", what, res.stderr)
				assert.Contains(t, []string{importRefused, "error: no server could be read; nothing was written"}, lines[len(lines)-1])
			})

			t.Run("import", func(t *testing.T) {
				res := runCLIIn(t, dir, fx.env, "import", path)
				require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
				assert.True(t, strings.HasPrefix(res.stdout, "# mcp-aggregator config, written by `mcp-aggregator import`"), res.stdout)
				imported := writeFile(t, filepath.Dir(path), "imported.yaml", res.stdout)
				before := runCLIIn(t, dir, fx.env, "tools", "--json", "--config", path)
				after := runCLIIn(t, dir, fx.env, "tools", "--json", "--config", imported)
				var b, a catalogOutput
				require.NoError(t, json.Unmarshal([]byte(before.stdout), &b), before.stdout)
				require.NoError(t, json.Unmarshal([]byte(after.stdout), &a), after.stdout)
				assert.Equal(t, b.Tools, a.Tools, "the imported YAML serves the same catalog")
				assert.NotEmpty(t, a.Tools)
				check := runCLIIn(t, dir, fx.env, "check", "--config", imported)
				assert.Contains(t, check.stdout, "read as mcp-aggregator YAML")
			})
		})
	}
}
