package integration

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clientSaw calls tool (the demo surface server's client tool, started with
// echo-client) and returns what the upstream instance that answered was
// declared as client capabilities, and its pid.
func clientSaw(t *testing.T, c *client, tool string) (json.RawMessage, float64) {
	t.Helper()
	var got struct {
		Capabilities json.RawMessage `json:"capabilities"`
		PID          float64         `json:"pid"`
	}
	require.NoError(t, json.Unmarshal(structuredOf(t, c.callToolResult(tool, map[string]any{})), &got))
	return got.Capabilities, got.PID
}

// TestHostExtensionsReachLeasedInstance: an instance leased to one session
// serves that host alone, so it is told the host's own settings of the
// client-side extensions the aggregator carries (MCP Apps), and none the
// host did not declare, nor any the aggregator does not carry. A shared
// instance keeps the aggregator's own declaration. The rest of the client
// capabilities are the aggregator's either way: what it relays. (The
// leased server declares MCP Apps itself, so the spare started at load,
// declared the aggregator's settings, is not leased to a host with others.)
func TestHostExtensionsReachLeasedInstance(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  leased:
    truely-stateless: false
    %s
    transform: [{prefix: l_}]
  shared:
    truely-stateless: true
    %s
    transform: [{prefix: s_}]
`, demoServer("surface", "echo-client", `extensions={"io.modelcontextprotocol/ui":{}}`), demoServer("surface", "echo-client")))
	a.waitLoaded()
	const aggregatorCaps = `{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},"sampling":{}`
	const ui = `"io.modelcontextprotocol/ui"`

	plain := a.newClient()
	plain.initializeWith(map[string]any{"sampling": map[string]any{}})
	caps, plainPID := clientSaw(t, plain, "l_client")
	assert.JSONEq(t, aggregatorCaps+`}`, string(caps), "a host that declares no extension: its instance is told of none")

	narrow := a.newClient()
	narrow.initializeWith(map[string]any{"extensions": map[string]any{
		"io.modelcontextprotocol/ui":    map[string]any{"mimeTypes": []string{"text/html;profile=mcp-app"}, "com.example/x": 1},
		"io.modelcontextprotocol/tasks": map[string]any{},
		"com.example/unknown":           map[string]any{"on": true},
	}})
	caps, narrowPID := clientSaw(t, narrow, "l_client")
	assert.JSONEq(t, aggregatorCaps+`,"extensions":{`+ui+`:{"mimeTypes":["text/html;profile=mcp-app"],"com.example/x":1}}}`, string(caps),
		"the host's own MCP Apps settings; extensions the aggregator does not carry are left out")
	assert.NotEqual(t, plainPID, narrowPID, "each session its own instance")

	again, pid := clientSaw(t, narrow, "l_client")
	assert.JSONEq(t, string(caps), string(again))
	assert.Equal(t, narrowPID, pid, "the lease holds")

	// A 2026-07-28 host declares its capabilities in each request: those of
	// the request that leased the instance count.
	modernCaps := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []string{"text/html;profile=mcp-app"}, "v": 2}}}
	result, rpcErr := modernCallAnswerIn(t, a.url, "", "l_client", modernCaps, "conversation-1")
	require.Empty(t, rpcErr, "%s", rpcErr)
	var got struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(structuredOf(t, result), &got))
	assert.JSONEq(t, aggregatorCaps+`,"extensions":{`+ui+`:{"mimeTypes":["text/html;profile=mcp-app"],"v":2}}}`, string(got.Capabilities))

	// A shared instance serves every host: the aggregator's declaration.
	for _, c := range []*client{plain, narrow} {
		caps, _ = clientSaw(t, c, "s_client")
		assert.JSONEq(t, aggregatorCaps+`,"extensions":{`+ui+`:{"mimeTypes":["text/html;profile=mcp-app"]}}}`, string(caps))
	}
}

// TestHostExtensionsSpareGivesWayUnderCap: a spare that does not suit a
// host (it declared MCP Apps, the host did not) gives its place to the
// instance started for that host, so with lease.max_instances 1 the host
// is served at once rather than kept waiting on the cap by a spare it
// cannot use.
func TestHostExtensionsSpareGivesWayUnderCap(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  leased:
    truely-stateless: false
    lease: {max_instances: 1, prewarm: 0, queue_timeout: 1s}
    %s
    transform: [{prefix: l_}]
`, demoServer("surface", "echo-client", `extensions={"io.modelcontextprotocol/ui":{}}`)))
	a.waitLoaded()
	plain := a.newClient()
	plain.initializeWith(map[string]any{})
	caps, _ := clientSaw(t, plain, "l_client")
	assert.JSONEq(t, `{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},"sampling":{}}`, string(caps))
}
