package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/configsource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runIn runs the command line in dir and returns stdout, stderr and the exit code.
func runIn(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func write(t *testing.T, path, text string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version", "-V"} {
		out, _, code := runIn(t, t.TempDir(), arg)
		assert.Equal(t, 0, code, arg)
		assert.Regexp(t, `^mcp-aggregator \S+\ncommit: \S+.*\ngo: go\S+ \S+/\S+\n$`, out, arg)
	}
}

func TestCheck(t *testing.T) {
	t.Run("a client's config is read, with its dialect, and missing commands are warned about", func(t *testing.T) {
		dir := t.TempDir()
		cfg := write(t, filepath.Join(dir, "claude.json"), `{"mcpServers": {
  "here": {"command": "sh", "args": ["-c", "true"]},
  "gone": {"command": "no-such-mcp-server-anywhere"},
  "local": {"command": "./bin/server"}
}}`)
		out, _, code := runIn(t, dir, "check", "--config", cfg)
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, cfg+": read as mcpServers JSON")
		assert.Contains(t, out, `warning: `+cfg+`:3: server "gone": command: "no-such-mcp-server-anywhere" is not found on PATH`)
		assert.Contains(t, out, `server "local": command: "`+filepath.Join(dir, "bin/server")+`" is not an executable file`)
		assert.NotContains(t, out, `server "here"`)
		assert.Contains(t, out, "ok: 3 server(s), 2 warning(s)")
	})
	t.Run("a file of an unknown shape is an error", func(t *testing.T) {
		dir := t.TempDir()
		cfg := write(t, filepath.Join(dir, "settings.json"), `{"theme": "dark"}`)
		out, _, code := runIn(t, dir, "check", "--config", cfg)
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "error: "+cfg+":1: not a config mcp-aggregator can read")
		assert.NotContains(t, out, "ok:")
	})
	t.Run("a file with no servers is warned about", func(t *testing.T) {
		dir := t.TempDir()
		cfg := write(t, filepath.Join(dir, "mcp.json"), `{"mcpServers": {}}`)
		out, _, code := runIn(t, dir, "check", "--config", cfg)
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "warning: "+cfg+": defines no servers")
		assert.Contains(t, out, "ok: 0 server(s), 1 warning(s)")
	})
	t.Run("without a config, check checks what serve would run, and says so", func(t *testing.T) {
		out, _, code := runIn(t, t.TempDir(), "check")
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, "warning: no config found in")
		assert.Contains(t, out, "ok: 2 server(s), 1 warning(s)")
	})
	t.Run("MCP_AGGREGATOR_CONFIG is read", func(t *testing.T) {
		dir := t.TempDir()
		cfg := write(t, filepath.Join(dir, "elsewhere.yaml"), "version: 1\nservers:\n  s: {command: sh}\n")
		t.Setenv(configsource.EnvVar, cfg)
		out, _, code := runIn(t, t.TempDir(), "check")
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, cfg+": read as mcp-aggregator YAML, 1 server(s)")
	})
}

func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "mcp-aggregator.yaml"), "version: 1\nservers: {}\n")
	cfg, _ := filepath.EvalSymlinks(filepath.Join(dir, "mcp-aggregator.yaml"))
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, _ = filepath.EvalSymlinks(exe)

	for _, client := range []string{"claude-desktop", "cursor", "gemini"} {
		out, errOut, code := runIn(t, dir, "client-config", client)
		require.Equal(t, 0, code, errOut)
		var got struct {
			MCPServers map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			} `json:"mcpServers"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		s := got.MCPServers["mcp-aggregator"]
		assert.Equal(t, exe, s.Command, client)
		require.Len(t, s.Args, 3)
		assert.Equal(t, []string{"serve", "--config"}, s.Args[:2])
		real, _ := filepath.EvalSymlinks(s.Args[2])
		assert.Equal(t, cfg, real, "the config is pinned by absolute path")
	}

	out, _, code := runIn(t, dir, "client-config", "vscode", "--name", "agg")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"servers": {`)
	assert.Contains(t, out, `"agg": {`)
	assert.Contains(t, out, `"type": "stdio"`)

	out, _, _ = runIn(t, dir, "client-config", "claude-code")
	assert.True(t, strings.HasPrefix(out, "claude mcp add --scope user mcp-aggregator -- "+exe+" serve --config "), out)

	out, _, _ = runIn(t, dir, "client-config", "codex")
	assert.Contains(t, out, "[mcp_servers.mcp-aggregator]\ncommand = ")
	assert.Contains(t, out, `args = ["serve", "--config", `)

	out, _, _ = runIn(t, dir, "client-config", "inspector")
	assert.Contains(t, out, "npx @modelcontextprotocol/inspector -e "+configsource.EnvVar+"=")
	assert.NotContains(t, out, "--config", "the Inspector would take --config for itself")

	_, errOut, code := runIn(t, dir, "client-config", "emacs")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "claude-code, claude-desktop, codex, cursor, gemini, inspector, vscode")
}

func TestImportCommand(t *testing.T) {
	dir := t.TempDir()
	src := write(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "fs"]}, "web": {"type": "http", "url": "https://x.example.com/mcp"}}}`)
	out, errOut, code := runIn(t, dir, "import", src)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "version: 1\n")
	assert.Contains(t, out, "  fs:\n    command: npx\n    args: [-y, fs]\n")
	assert.Contains(t, out, "    transport: streamable_http\n")

	out, errOut, code = runIn(t, dir, "import", write(t, filepath.Join(dir, "x.json"), `{"theme": 1}`))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not a config mcp-aggregator can read")
	assert.Empty(t, out, "nothing read, nothing printed: `import x.json > mcp-aggregator.yaml` must not write an empty config")
}

// TestImportOutputEndsWithNewline: the config import prints ends with a newline, so
// that in a terminal the notes that follow on stderr ("checking the result:") start on
// a line of their own, even when the last value ends with a line separator (U+2028).
func TestImportOutputEndsWithNewline(t *testing.T) {
	dir := t.TempDir()
	src := write(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers": {"fs": {"command": "npx", "env": {"KEY": "${IMPORT_UNSET_VAR}", "NOTE": "x\n\u2028"}}}}`)
	out, errOut, code := runIn(t, dir, "import", src)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "checking the result:\nwarning: ", "a variable not set yet is a warning")
	assert.True(t, strings.HasSuffix(out, "\n"), "%q", out)
}

// TestImportRefusesTooLargeFile: a file larger than a config may be is refused before
// it is read, with a message saying so, and nothing is printed.
func TestImportRefusesTooLargeFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "dump.json")
	require.NoError(t, os.WriteFile(src, []byte(`{"mcpServers": {}}`), 0o644))
	require.NoError(t, os.Truncate(src, config.MaxFileSize+1)) // sparse
	out, errOut, code := runIn(t, dir, "import", src)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "dump.json: file too large: it has 16777217 bytes, more than the 16 MiB a config file may be")

	out, _, code = runIn(t, dir, "check", "--config", src)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "more than the 16 MiB a config file may be")
}

// TestCheckOwnKeysWithoutVersion: a JSON config that uses mcp-aggregator's own keys
// (a whitelist, a transform) but lacks its version is not taken for a TENEX mcp.json,
// whose reading drops the whitelist and exports every tool it hides: check names the
// file, asks for the version and exits 1.
func TestCheckOwnKeysWithoutVersion(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "mcp.json"), `{"servers": {"a": {"command": "sh", "transform": [{"prefix": "a_"}], "truely-stateless": true, "tools": {"whitelist": ["read_*"]}}}}`)
	out, errOut, code := runIn(t, dir, "check", "--config", cfg)
	assert.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, "error: "+cfg+":1: version: required: the file uses keys of mcp-aggregator's own config")
	assert.Contains(t, out, `add "version": 1 to its top-level object`)
	assert.NotContains(t, out, "read as TENEX")
	assert.NotContains(t, out, `did you mean "transport"`)
}

func TestLoggerScrubsWhatConfigsHold(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "c.yaml"), "version: 1\nservers:\n  a: {command: sh, env: {TOKEN: {env: ONB_HOST_SECRET}}}\n")
	t.Setenv("ONB_HOST_SECRET", "onboarding-host-secret")
	var c common
	c.logLevel, c.logFormat = "info", "text"
	var buf bytes.Buffer
	log, err := c.logger(&buf)
	require.NoError(t, err)
	c.configs = configFlags{cfg}
	_, _ = c.source().Load()
	log.Info("upstream stderr", "server", "b", "line", "env: TOKEN=onboarding-host-secret")
	assert.NotContains(t, buf.String(), "onboarding-host-secret")
	assert.Contains(t, buf.String(), "TOKEN=<redacted>")
}
