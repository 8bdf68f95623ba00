package upstream

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// TestMissingCommandNamesNoSecret: a command not found is named without the text the
// environment put into it.
func TestMissingCommandNamesNoSecret(t *testing.T) {
	const secret = "s3cr3tVALUE12345"
	lookup := func(name string) (string, bool) {
		if name == "SECRETX" {
			return secret, true
		}
		return "", false
	}
	for _, command := range []string{"py${SECRETX}", "/nonexistent/${SECRETX}/bin"} {
		cfg := "version: 1\nservers:\n  d: {command: '" + command + "'}\n"
		ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "c.yaml"), []byte(cfg), lookup)
		require.NotNil(t, ws, "%v", problems)
		found := MissingCommands(ws, "/nonexistent-path")
		require.Len(t, found, 1, command)
		assert.NotContains(t, found[0].String(), secret, command)
		assert.Contains(t, found[0].String(), "<redacted>", command)
	}
}

// A stdio server's command is looked up as its start would: on the PATH
// of its own env, else the host's; a path relative to its cwd. Only the
// servers whose command is not found are warned about.
func TestMissingCommands(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("on Windows any file with an extension of PATHEXT is executable")
	}
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "plain"), []byte("x"), 0o644))
	ws := &config.Workspace{Servers: []*config.Server{
		{ID: "on-host-path", Transport: config.TransportStdio, Command: "tool"},
		{ID: "own-path", Transport: config.TransportStdio, Command: "tool", Env: map[string]string{"PATH": "/nonexistent"}},
		{ID: "relative", Transport: config.TransportStdio, Command: "./tool", Cwd: bin},
		{ID: "not-executable", Transport: config.TransportStdio, Command: filepath.Join(bin, "plain")},
		{ID: "remote", Transport: config.TransportHTTP, URL: "https://x.example.com/mcp"},
	}}
	var warned []string
	for _, pr := range MissingCommands(ws, bin) {
		assert.Equal(t, config.SeverityWarning, pr.Severity)
		assert.Equal(t, "command", pr.Field)
		warned = append(warned, pr.Server)
	}
	assert.Equal(t, []string{"own-path", "not-executable"}, warned)
}
