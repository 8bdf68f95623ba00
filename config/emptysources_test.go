package config

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEmptySources(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"full.yaml":   "version: 1\nservers:\n  a:\n    url: https://mcp.example.com/mcp\n",
		"empty.yaml":  "version: 1\nservers: {}\n",
		"claude.json": `{"mcpServers": {"off": {"command": "x", "disabled": true}}}`,
	})
	files := []string{filepath.Join(dir, "full.yaml"), filepath.Join(dir, "empty.yaml"), filepath.Join(dir, "claude.json")}
	ws, _ := Load(files, envOf(nil))
	require.NotNil(t, ws)
	got := ws.EmptySources()
	require.Len(t, got, 2, "%v", got)
	for i, file := range files[1:] {
		assert.Equal(t, SeverityWarning, got[i].Severity)
		assert.Equal(t, file, got[i].File)
		assert.Contains(t, got[i].Message, "defines no servers (read as ")
	}
	assert.Contains(t, got[1].Message, "read as "+string(ws.Sources[2].Dialect))

	full, _ := Load(files[:1], envOf(nil))
	assert.Empty(t, full.EmptySources(), "a file with a server")
}
