package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
)

// adminTools are exported ahead of every upstream tool.
var adminTools = []string{"mcp_release", "mcp_status"}

// fidelityTools returns the tools the fidelity demo server lists, as in its fixture.
func fidelityTools(t testing.TB) []json.RawMessage {
	t.Helper()
	var fixture struct {
		Tools []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(demo.FidelityFixture("tools.json"), &fixture))
	require.NotEmpty(t, fixture.Tools)
	return fixture.Tools
}

// fidelityConfig fronts the fidelity demo server as fid, shared by every
// session, its tools prefixed fx_.
func fidelityConfig() string {
	return "version: 1\nservers:\n" + demoEntry("fid", "fx_", "fidelity", statelessServer)
}

// TestFidelity checks that what a client receives through the aggregator equals what
// the upstream sent, byte-level details included: every tool definition (only the name
// differs, by the configured prefix), a result with every kind of content, a JSON-RPC
// error with structured data, and arguments on the way up.
func TestFidelity(t *testing.T) {
	t.Parallel()
	fixtureTools := fidelityTools(t)
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, fidelityConfig())
		a.waitLoaded()
		c := a.connect()

		t.Run("tools", func(t *testing.T) {
			tools := c.listTools()
			names := toolNames(t, tools)
			require.GreaterOrEqual(t, len(names), len(adminTools))
			assert.Equal(t, adminTools, names[:len(adminTools)], "admin tools come first")

			got := map[string]map[string]any{}
			for _, raw := range tools[len(adminTools):] {
				tool := decodeObject(t, raw)
				name, _ := tool["name"].(string)
				original, renamed := strings.CutPrefix(name, "fx_")
				assert.True(t, renamed, "tool %q lacks the configured prefix fx_", name)
				tool["name"] = original // the one field the aggregator may change
				got[original] = tool
			}
			assert.Len(t, got, len(fixtureTools), "exported tools: %v", names)
			for _, raw := range fixtureTools {
				want := decodeObject(t, raw)
				name := want["name"].(string)
				if assert.Contains(t, got, name, "tool %q is not exported", name) {
					assert.Equal(t, want, got[name], "tool %q differs from what the upstream sent", name)
				}
			}
			// Absent members stay absent: no empty annotations, title, icons or _meta appear.
			if tool, ok := got["no_annotations"]; ok {
				for _, key := range []string{"annotations", "title", "icons", "_meta", "outputSchema"} {
					assert.NotContains(t, tool, key, "no_annotations gained %q", key)
				}
			}
		})

		t.Run("rich result", func(t *testing.T) {
			result := c.callToolResult("fx_rich", map[string]any{})
			assertJSONEqual(t, demo.FidelityFixture("rich_result.json"), result)
		})

		t.Run("JSON-RPC error", func(t *testing.T) {
			resp := c.callTool("fx_broken", map[string]any{})
			assert.Empty(t, resp.Result, "a failed call has no result")
			require.NotEmpty(t, resp.Error, "fx_broken must fail with a JSON-RPC error")
			assertJSONEqual(t, demo.FidelityFixture("error.json"), resp.Error)
		})

		t.Run("arguments", func(t *testing.T) {
			// kitchen_sink echoes its arguments exactly as it received them.
			args := json.RawMessage(`{"origin":{"x":1.5,"y":-2},"huge":123456789012345678901234567890,` +
				`"ratio":1e-9,"label":"<b>&\"é中🚀","tags":["a","b"],"labels":{},"extras":{"k":[]},"nickname":null}`)
			result := c.callToolResult("fx_kitchen_sink", args)
			var r struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				StructuredContent struct {
					Arguments json.RawMessage `json:"arguments"`
				} `json:"structuredContent"`
			}
			require.NoError(t, json.Unmarshal(result, &r))
			require.Len(t, r.Content, 1)
			assertJSONEqual(t, args, []byte(r.Content[0].Text), "arguments as the upstream received them")
			assertJSONEqual(t, args, r.StructuredContent.Arguments)
		})
	})
}

// TestUpstreamListChanged has an upstream add a tool and announce it: the aggregator
// must re-list that server, export the new tool under the configured name and tell
// the client with notifications/tools/list_changed.
func TestUpstreamListChanged(t *testing.T) {
	t.Parallel()
	// Over stdio, server notifications share the one connection; over HTTP they would
	// need a standing GET stream, which this client does not open.
	a := serveConfig(t, stdioTransport, fidelityConfig())
	a.waitLoaded()
	c := a.connect()
	require.NotContains(t, toolNames(t, c.listTools()), "fx_added_1")
	listChanged := func() int {
		notes, _ := c.inbox.snapshot()
		return len(slices.DeleteFunc(notes, func(n notification) bool { return n.Method != "notifications/tools/list_changed" }))
	}
	before := listChanged()

	assert.Equal(t, "added added_1", firstText(t, c.callToolResult("fx_add_tool", map[string]any{})))
	_, ok := c.waitNotification(func(notification) bool { return listChanged() > before }, startTimeout)
	require.True(t, ok, "no notifications/tools/list_changed after the upstream's tools changed")

	require.Contains(t, toolNames(t, c.listTools()), "fx_added_1")
	result := c.callToolResult("fx_added_1", json.RawMessage(`{"k":[1]}`))
	assert.JSONEq(t, `{"k":[1]}`, firstText(t, result), "the new tool is callable under its exported name")
}
