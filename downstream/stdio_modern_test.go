package downstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// Over stdio as over HTTP, a 2026-07-28 request without client
// capabilities in _meta is -32602, and one of a method that generation
// does not define is -32601; neither reaches the handler.
func TestStdioModernRequestChecks(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	code := func(m map[string]json.RawMessage) int {
		var e struct {
			Code int `json:"code"`
		}
		require.NoError(t, json.Unmarshal(m["error"], &e), "%v", m)
		return e.Code
	}
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	m := p.next(t)
	assert.Equal(t, "1", string(m["id"]))
	assert.Equal(t, jsonrpc.CodeInvalidParams, code(m))
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	m = p.next(t)
	assert.Equal(t, "2", string(m["id"]))
	assert.Equal(t, jsonrpc.CodeMethodNotFound, code(m))
	assert.Zero(t, h.handled.Load())
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	assert.Equal(t, "3", string(p.next(t)["id"]))
	assert.EqualValues(t, 1, h.handled.Load())
}

// A 2026-07-28 request over stdio comes on the connection's session, yet
// belongs to none: Sessionless says so, as it does for HTTP, where such a
// request has no Session at all.
func TestStdioModernRequestIsSessionless(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	result := func(m map[string]json.RawMessage) map[string]string {
		var r map[string]string
		require.NoError(t, json.Unmarshal(m["result"], &r), "%v", m)
		return r
	}
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	assert.Equal(t, "true", result(p.next(t))["sessionless"])

	var none *Request = &Request{Msg: &jsonrpc.Message{Method: "tools/list"}, Protocol: "2025-11-25"}
	assert.True(t, none.Sessionless(), "a request without a session is sessionless whatever its version")
}
