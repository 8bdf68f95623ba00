package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUsageErrors: a command line the binary cannot act on exits 2 with a message on
// stderr that names what is wrong, before anything is loaded or started.
func TestUsageErrors(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "mcp.yaml"), "version: 1\nservers:\n  s: {url: 'https://mcp.example.com/mcp', auth: {type: oauth}}\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"version with an argument", []string{"version", "extra"}, `version: unexpected argument "extra"`},
		{"check with a bad log level", []string{"check", "--config", cfg, "--log-level", "loud"}, `--log-level "loud"`},
		{"check with a bad log format", []string{"check", "--config", cfg, "--log-format", "xml"}, `--log-format "xml"`},
		{"login with a bad log level", []string{"login", "s", "--config", cfg, "--log-level", "loud"}, `--log-level "loud"`},
		{"logout with a bad log format", []string{"logout", "s", "--config", cfg, "--log-format", "xml"}, `--log-format "xml"`},
		{"serve with no settle period", []string{"serve", "--config", cfg, "--reload-settle", "0s"}, "--reload-settle 0s"},
		{"serve with an endless settle period", []string{"serve", "--config", cfg, "--reload-settle", "1h"}, "at most 1m0s"},
		{"client-config with an empty name", []string{"client-config", "codex", "--config", cfg, "--name", " "}, "--name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runIn(t, dir, tt.args...)
			assert.Equal(t, 2, code, "stdout: %s\nstderr: %s", out, errOut)
			assert.Contains(t, errOut, tt.want)
			assert.Empty(t, out)
		})
	}
}

// TestImportOfNoServerPrintsNothing: files that define no server (none at all, or only
// disabled ones), or whose servers could not be read, print no config, which written over
// a watched config would stop every server it runs, and exit 1 saying why.
func TestImportOfNoServerPrintsNothing(t *testing.T) {
	const none = "error: the files define no server to import (none, or only disabled ones); nothing was written\n"
	const unread = "error: no server could be read; nothing was written\n"
	dir := t.TempDir()
	for name, tt := range map[string]struct{ text, want string }{
		"empty.json":    {`{"mcpServers": {}}`, none},
		"disabled.json": {`{"mcpServers": {"off": {"command": "x", "disabled": true}}}`, none},
		"native.yaml":   {"version: 1\nservers: {}\n", none},
		"list.json":     {`{"mcpServers": []}`, unread},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runIn(t, dir, "import", write(t, filepath.Join(dir, name), tt.text))
			assert.Equal(t, 1, code, errOut)
			assert.Empty(t, out)
			assert.True(t, strings.HasSuffix(errOut, tt.want), errOut)
		})
	}
}

// TestClientConfigKeepsTheNameOnPATH: started through a symlink on PATH (as package
// managers install binaries), client-config pins that symlink, which an upgrade keeps,
// not the file it points to now.
func TestClientConfigKeepsTheNameOnPATH(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	bin := t.TempDir()
	link := filepath.Join(bin, "mcp-aggregator")
	require.NoError(t, os.Symlink(exe, link))
	t.Setenv("PATH", bin)
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "mcp.yaml"), "version: 1\nservers: {}\n")

	saved := os.Args[0]
	t.Cleanup(func() { os.Args[0] = saved })
	for _, arg0 := range []string{"mcp-aggregator", link} {
		os.Args[0] = arg0
		out, errOut, code := runIn(t, dir, "client-config", "codex", "--config", cfg)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "command = \""+link+"\"\n", arg0)
	}

	// A name on PATH that is another file is not this binary.
	other := filepath.Join(t.TempDir(), "mcp-aggregator")
	write(t, other, "#!/bin/sh\n")
	require.NoError(t, os.Chmod(other, 0o755))
	t.Setenv("PATH", filepath.Dir(other))
	os.Args[0] = "mcp-aggregator"
	out, errOut, code := runIn(t, dir, "client-config", "codex", "--config", cfg)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "command = \""+exe+"\"\n")
}
