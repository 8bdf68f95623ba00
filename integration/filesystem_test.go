package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerFilesystem puts the reference server-filesystem behind the
// aggregator, confined to a directory, and reads a file through it.
func TestServerFilesystem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const text = "line one\nline two <&> ünïcødé\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(text), 0o644))
	entry := nodeEntry(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	a := serveConfig(t, stdioTransport, fmt.Sprintf(`version: 1
servers:
  fs:
    command: node
    args: [%s, %s]
    transform: [{prefix: 'mcp__fs__'}]
    tools: {whitelist: [read_text_file, list_directory]}
`, quoted(entry), quoted(dir)))
	a.waitLoaded()
	c := a.connect()
	assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "mcp__fs__read_text_file", "mcp__fs__list_directory"},
		toolNames(t, c.listTools()))

	var res struct {
		Structured struct {
			Content string `json:"content"`
		} `json:"structuredContent"`
	}
	raw := c.callToolResult("mcp__fs__read_text_file", map[string]any{"path": filepath.Join(dir, "notes.txt")})
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	assert.Equal(t, text, res.Structured.Content, "the file comes through unchanged")
	assert.Contains(t, firstText(t, c.callToolResult("mcp__fs__list_directory", map[string]any{"path": dir})), "notes.txt")

	// Outside its directory the server refuses, and the refusal reaches the client.
	outside := c.callTool("mcp__fs__read_text_file", map[string]any{"path": "/etc/hostname"})
	refused := len(outside.Error) > 0 || strings.Contains(string(outside.Result), `"isError":true`)
	assert.True(t, refused, "a path outside the allowed directory is refused: %s", outside.Result)
}
