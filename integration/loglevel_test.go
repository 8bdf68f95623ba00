package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModernLogLevelPerRequest: under 2026-07-28 a request's log messages
// follow the level its own _meta names, on its own stream, and there are
// none for a request that names no level, even over stdio, where the
// request travels on the connection's session. A level that is not one is
// refused.
func TestModernLogLevelPerRequest(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, `version: 1
servers:
  surface:
    truely-stateless: true
    `+demoServer("surface")+`
`)
	a.waitLoaded()
	c := a.newClient() // sessionless: no initialize
	logs := []any{
		map[string]any{"method": "notifications/message", "params": map[string]any{"level": "debug", "data": "quiet"}},
		map[string]any{"method": "notifications/message", "params": map[string]any{"level": "warning", "data": "loud"}},
	}
	call := func(level any) *response {
		meta := modernMeta()
		if level != nil {
			meta["io.modelcontextprotocol/logLevel"] = level
		}
		return c.mustRequest("tools/call", map[string]any{"name": "notify", "arguments": map[string]any{"notifications": logs}, "_meta": meta})
	}
	messages := func() []json.RawMessage {
		var out []json.RawMessage
		for _, n := range c.inboxNotes() {
			if n.Method == "notifications/message" {
				out = append(out, n.Params)
			}
		}
		return out
	}

	// The messages come before the response on the one stream, so they are
	// in once it is.
	require.Empty(t, string(call("warning").Error))
	got := messages()
	require.Len(t, got, 1, "only the warning is at or above the request's level: %s", got)
	assert.JSONEq(t, `{"level":"warning","data":"loud","logger":"surface"}`, string(got[0]))

	require.Empty(t, string(call(nil).Error))
	assert.Len(t, messages(), 1, "a request without a level gets no log messages")

	require.Empty(t, string(call("debug").Error))
	assert.Len(t, messages(), 3, "at debug, both")

	resp := call("loud")
	require.NotEmpty(t, string(resp.Error), "an unknown level is refused")
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(resp.Error, &e))
	assert.Equal(t, -32602, e.Code)
	assert.Contains(t, e.Message, "not a log level")
	assert.Equal(t, -32602, func() int {
		r := call(7)
		require.NoError(t, json.Unmarshal(r.Error, &e))
		return e.Code
	}(), "a level must be a string")
}
