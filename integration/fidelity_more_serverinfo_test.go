package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
)

// serverInfoKey is where a 2026-07-28 result's _meta names the server that
// produced it.
const serverInfoKey = "io.modelcontextprotocol/serverInfo"

// modernRequest sends a sessionless (2026-07-28) request on c and returns
// its result, decoded.
func modernRequest(t *testing.T, c *client, method string, params map[string]any) map[string]any {
	t.Helper()
	p := maps.Clone(params)
	meta := modernMeta()
	meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"sampling": map[string]any{}}
	p["_meta"] = meta
	resp := c.mustRequest(method, p)
	require.Empty(t, string(resp.Error), "%s", method)
	return decodeObject(t, resp.Result)
}

// resultServerInfo returns the serverInfo in a result's _meta (nil: none).
func resultServerInfo(result map[string]any) any {
	meta, _ := result["_meta"].(map[string]any)
	return meta[serverInfoKey]
}

// TestFidelityMoreServerInfoOnEveryResult: protocol 2026-07-28 says a
// server SHOULD name itself in every result's _meta
// (io.modelcontextprotocol/serverInfo), not only server/discover's. The
// aggregator is that server for its client: each result of each method
// names it, as server/discover does, and the rest of an upstream's result,
// its own _meta included, is as the upstream sent it.
func TestFidelityMoreServerInfoOnEveryResult(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, fmt.Sprintf(`version: 1
servers:
  fid:
    truely-stateless: true
    %s
    transform: [{prefix: fx_}]
  surface:
    truely-stateless: true
    %s
    transform: [{prefix: s_}]
`, demoServer("fidelity"), demoServer("surface")))
	a.waitLoaded()
	c := a.newClient()

	discover := modernRequest(t, c, "server/discover", map[string]any{})
	want := resultServerInfo(discover)
	require.NotNil(t, want, "server/discover names the aggregator: %v", discover)
	assert.Equal(t, "mcp-aggregator", want.(map[string]any)["name"])

	requests := []struct {
		method string
		params map[string]any
	}{
		{"tools/list", map[string]any{}},
		{"tools/call", map[string]any{"name": "s_levels", "arguments": map[string]any{}}},
		{"resources/list", map[string]any{}},
		{"resources/templates/list", map[string]any{}},
		{"resources/read", map[string]any{"uri": "demo://r/1"}},
		{"prompts/list", map[string]any{}},
		{"prompts/get", map[string]any{"name": "s_p1", "arguments": map[string]any{"a": "x"}}},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "s_p1"},
			"argument": map[string]any{"name": "a", "value": "o"}}},
		// The upstream asks for sampling: the result hands the request to the client.
		{"tools/call", map[string]any{"name": "s_ask", "arguments": map[string]any{}}},
	}
	for _, r := range requests {
		result := modernRequest(t, c, r.method, r.params)
		assert.Equal(t, want, resultServerInfo(result), "%s %v: %v", r.method, r.params["name"], result)
	}

	// An upstream's result keeps its own _meta, big numbers and all; the
	// aggregator adds what the protocol asks of every result.
	fixture := decodeObject(t, demo.FidelityFixture("rich_result.json"))
	fixture["resultType"] = "complete"
	fixture["_meta"].(map[string]any)[serverInfoKey] = want
	got := modernRequest(t, c, "tools/call", map[string]any{"name": "fx_rich", "arguments": map[string]any{}})
	assertJSONEqual(t, mustJSON(t, fixture), mustJSON(t, got))
}

// TestFidelityMoreServerInfoOfModernUpstream: a 2026-07-28 upstream names
// itself in its results' _meta. Its client talks to the aggregator, not to
// it: a 2026-07-28 client is told the aggregator's name, as on every other
// result, and a 2025-11-25 client, which met the aggregator at initialize,
// is not told another server's.
func TestFidelityMoreServerInfoOfModernUpstream(t *testing.T) {
	t.Parallel()
	url, serverLog := startInputServer(t)
	a := serveConfig(t, stdioTransport, modernUpstreamConfig(url))
	a.waitLoaded()
	modern := a.newClient()
	want := resultServerInfo(modernRequest(t, modern, "server/discover", map[string]any{}))
	require.NotNil(t, want)
	for _, r := range []struct {
		method string
		params map[string]any
	}{
		{"tools/call", map[string]any{"name": "touch_note", "arguments": map[string]any{}}},
		{"resources/read", map[string]any{"uri": "input://note"}},
	} {
		result := modernRequest(t, modern, r.method, r.params)
		assert.Equal(t, want, resultServerInfo(result), "%s: %v; server log:\n%s", r.method, result, serverLog)
	}

	b := serveConfig(t, stdioTransport, modernUpstreamConfig(url))
	b.waitLoaded()
	old := b.connect()
	for _, result := range []json.RawMessage{
		old.callToolResult("touch_note", map[string]any{}),
		old.mustRequest("resources/read", map[string]any{"uri": "input://note"}).Result,
	} {
		assert.Nil(t, resultServerInfo(decodeObject(t, result)), "a 2025-11-25 client is not told the upstream's name: %s", result)
	}
}
