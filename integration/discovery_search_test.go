package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// discoveryServers renders server blocks of the npm reference servers:
// filesystem (confined to dir) and everything shared, memory leased.
func discoveryServers(t *testing.T, dir string, withMemory bool) string {
	t.Helper()
	blocks := fmt.Sprintf(`  fs:
    truely-stateless: true
    command: node
    args: [%s, %s]
    transform: [{prefix: fs_}]
  everything:
    truely-stateless: true
    command: node
    args: [%s, stdio]
    transform: [{prefix: everything_}]
`, quoted(nodeEntry(t, "@modelcontextprotocol/server-filesystem/dist/index.js")), quoted(dir), quoted(nodeEntry(t, everythingEntry)))
	if withMemory {
		blocks += fmt.Sprintf(`  memory:
    command: node
    args: [%s]
    env: {MEMORY_FILE_PATH: %s}
    transform: [{prefix: memory_}]
`, quoted(nodeEntry(t, memoryEntry)), quoted(filepath.Join(dir, "memory.jsonl")))
	}
	return blocks
}

// discoveryConfig is a search-mode config over the reference servers.
func discoveryConfig(t *testing.T, dir string, withMemory bool) string {
	return `version: 1
discovery:
  mode: search
  always: [fs_read_text_file]
servers:
` + discoveryServers(t, dir, withMemory)
}

// foundTool is one tool of an mcp_search_tools result.
type foundTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Server      string          `json:"server"`
}

// searchTools calls mcp_search_tools and returns the tools found, best first.
func searchTools(t *testing.T, c *client, query string) []foundTool {
	t.Helper()
	raw := c.callToolResult("mcp_search_tools", map[string]any{"query": query})
	var res struct {
		Structured struct {
			Tools []foundTool `json:"tools"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	require.False(t, res.IsError, "%s", raw)
	assert.NotEmpty(t, firstText(t, raw), "a text rendering for clients that read only text")
	return res.Structured.Tools
}

func foundNames(tools []foundTool) []string {
	out := make([]string, len(tools))
	for i, tool := range tools {
		out[i] = tool.Name
	}
	return out
}

// TestDiscoverySearchMode runs search mode over stdio and HTTP in front of
// the npm reference servers: the short tools/list, search, and calls
// through mcp_call_tool that answer exactly what the direct call answers.
func TestDiscoverySearchMode(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		notes := filepath.Join(dir, "notes.txt")
		require.NoError(t, os.WriteFile(notes, []byte("line one\nline two <&> ünïcødé\n"), 0o644))
		a := serveConfig(t, tr, discoveryConfig(t, dir, true))
		a.waitLoaded()
		c := a.connect()

		listed := c.listTools()
		assert.Equal(t, []string{"mcp_release", "mcp_status", "mcp_search_tools", "mcp_call_tool", "fs_read_text_file"}, toolNames(t, listed))

		found := searchTools(t, c, "read the contents of a text file")
		require.NotEmpty(t, found)
		assert.Contains(t, foundNames(found), "fs_read_text_file", "%v", foundNames(found))
		i := slices.IndexFunc(found, func(f foundTool) bool { return f.Name == "fs_read_text_file" })
		assert.Equal(t, "fs", found[i].Server)
		var def struct {
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		require.NoError(t, json.Unmarshal(listed[4], &def))
		assert.Equal(t, def.Description, found[i].Description)
		assertJSONEqual(t, def.InputSchema, found[i].InputSchema, "the input schema as the server sent it")

		assert.Equal(t, "memory_create_entities", searchTools(t, c, "create entities in the knowledge graph")[0].Name)
		assert.Equal(t, "everything_get-sum", searchTools(t, c, "everything_get-sum")[0].Name)

		// The same call, directly and through mcp_call_tool: equal as JSON.
		for _, call := range []struct {
			name string
			args map[string]any
		}{
			{"fs_read_text_file", map[string]any{"path": notes}},
			{"fs_list_directory", map[string]any{"path": dir}},
			{"everything_echo", map[string]any{"message": "hello <world> & ünïcødé"}},
			{"everything_get-sum", map[string]any{"a": 12345678901234, "b": 1}},
			{"everything_get-structured-content", map[string]any{"location": "New York"}},
			{"fs_read_text_file", map[string]any{"path": "/etc/hostname"}}, // refused by the server: the refusal is the same
		} {
			direct := c.callTool(call.name, call.args)
			through := c.callTool("mcp_call_tool", map[string]any{"name": call.name, "arguments": call.args})
			require.Equal(t, len(direct.Result) > 0, len(through.Result) > 0, "%s: both answer with a result, or both with an error", call.name)
			if len(direct.Result) > 0 {
				assertJSONEqual(t, direct.Result, through.Result, "%s: result", call.name)
			} else {
				assertJSONEqual(t, direct.Error, through.Error, "%s: error", call.name)
			}
		}

		// A leased server through mcp_call_tool: the session's lease, kept
		// by the direct calls that follow.
		created := c.callToolResult("mcp_call_tool", map[string]any{"name": "memory_create_entities", "arguments": map[string]any{
			"entities": []any{map[string]any{"name": "Ada", "entityType": "person", "observations": []any{"wrote the first program"}}}}})
		assert.Contains(t, string(created), "mcp_release", "the first lease's reminder")
		assert.Contains(t, firstText(t, c.callToolResult("memory_read_graph", map[string]any{})), "wrote the first program")

		unknown := c.callToolResult("mcp_call_tool", map[string]any{"name": "fs_read_txt_file", "arguments": map[string]any{"path": notes}})
		assert.Contains(t, string(unknown), `"isError":true`)
		assert.Contains(t, firstText(t, unknown), "Closest: fs_read_text_file")
	})
}
