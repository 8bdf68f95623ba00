package downstream

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// A sessionless request must carry its client capabilities in _meta (an
// object; {} declares none): without them it is malformed, -32602 with
// 400, and never reaches the Handler.
func TestHTTPModernRequiresClientCapabilities(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	for name, meta := range map[string]string{
		"absent": `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
		"null":   `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":null}`,
		"string": `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"all"}`,
	} {
		t.Run(name, func(t *testing.T) {
			resp := s.post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":`+meta+`}}`, modernHeaders("tools/list", ""))
			msg := requireRefused(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidParams, protocol.MetaClientCapabilities)
			assert.JSONEq(t, `7`, string(msg.ID))
		})
	}
	assert.Empty(t, h.seen())
}

// Methods protocol 2026-07-28 does not define are answered 404 with
// -32601, naming what replaces them, and never reach the Handler.
func TestHTTPModernRefusesMethodsOfTheSessionGeneration(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	for method, hint := range map[string]string{
		"ping":                "server/discover",
		"initialize":          "initialize without",
		"logging/setLevel":    MetaLogLevel,
		"resources/subscribe": "subscriptions/listen",
		"tasks/list":          "tasks/list is not part of protocol 2026-07-28",
	} {
		t.Run(method, func(t *testing.T) {
			name := ""
			extra := ""
			if method == "resources/subscribe" {
				name, extra = "file:///a", `"uri":"file:///a"`
			}
			resp := s.post(t, modernBody(method, "2026-07-28", extra), modernHeaders(method, name))
			msg := requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeMethodNotFound, hint)
			assert.JSONEq(t, `7`, string(msg.ID))
		})
	}
	assert.Empty(t, h.seen())
	assert.Zero(t, s.tr.Sessions())
}

// Last-Event-ID is ignored in protocol 2026-07-28: the request is served
// as a new one.
func TestHTTPModernIgnoresLastEventID(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	resp := s.post(t, modernBody("tools/list", "2026-07-28", ""), with(modernHeaders("tools/list", ""), headerLastEventID, "3"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	msg := readMessage(t, resp)
	require.Nil(t, msg.Error)
	assert.JSONEq(t, `{"method":"tools/list"}`, string(msg.Result))
}

// An Mcp-Name with characters a header value cannot carry plain (here raw
// UTF-8) is a malformed header even when its bytes equal the body's name:
// such a name travels base64-encoded.
func TestHTTPModernNameHeaderMustBeHeaderSafe(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	body := modernBody("prompts/get", "2026-07-28", `"name":"héllo"`)
	msg := requireRefused(t, s.post(t, body, modernHeaders("prompts/get", "héllo")), http.StatusBadRequest, codeHeaderMismatch, "=?base64?")
	assert.JSONEq(t, `7`, string(msg.ID))
	assert.Empty(t, h.seen())
}
