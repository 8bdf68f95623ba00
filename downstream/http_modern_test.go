package downstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// modernBody is a 2026-07-28 request whose params carry version in _meta
// beside extra members.
func modernBody(method, version, extra string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientCapabilities":{}}`
	if version == "" {
		meta = `"_meta":{}`
	}
	if extra != "" {
		extra = "," + extra
	}
	return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + meta + extra + `}}`
}

func modernHeaders(method, name string) map[string]string {
	h := map[string]string{headerProtocol: "2026-07-28", headerMethod: method}
	if name != "" {
		h[headerName] = name
	}
	return h
}

func with(h map[string]string, k, v string) map[string]string {
	h[k] = v
	return h
}

func TestHTTPModernRequests(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	call := modernBody("tools/call", "2026-07-28", `"name":"echo","arguments":{}`)
	read := modernBody("resources/read", "2026-07-28", `"uri":"file:///a b.txt"`)

	for _, tc := range []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		code   int // of the refusal
		hint   string
	}{
		{"tools/call", call, modernHeaders("tools/call", "echo"), http.StatusOK, 0, ""},
		{"resources/read", read, modernHeaders("resources/read", "file:///a b.txt"), http.StatusOK, 0, ""},
		{"base64 name", modernBody("prompts/get", "2026-07-28", `"name":"héllo"`),
			modernHeaders("prompts/get", "=?base64?"+base64.StdEncoding.EncodeToString([]byte("héllo"))+"?="), http.StatusOK, 0, ""},
		{"no name needed", modernBody("tools/list", "2026-07-28", ""), modernHeaders("tools/list", ""), http.StatusOK, 0, ""},
		{"session id ignored", call, with(modernHeaders("tools/call", "echo"), headerSessionID, "forged"), http.StatusOK, 0, ""},

		{"method mismatch", call, modernHeaders("tools/list", "echo"), http.StatusBadRequest, codeHeaderMismatch, `Mcp-Method header "tools/list" does not match`},
		{"method missing", call, with(modernHeaders("tools/call", "echo"), headerMethod, ""), http.StatusBadRequest, codeHeaderMismatch, "Mcp-Method header is required"},
		{"name mismatch", call, modernHeaders("tools/call", "other"), http.StatusBadRequest, codeHeaderMismatch, `Mcp-Name header "other" does not match params.name "echo"`},
		{"name missing", call, modernHeaders("tools/call", ""), http.StatusBadRequest, codeHeaderMismatch, "Mcp-Name header is required"},
		{"uri mismatch", read, modernHeaders("resources/read", "file:///b"), http.StatusBadRequest, codeHeaderMismatch, "params.uri"},
		{"bad base64", call, modernHeaders("tools/call", "=?base64?!!?="), http.StatusBadRequest, codeHeaderMismatch, "not valid base64"},
		{"name not a string", modernBody("tools/call", "2026-07-28", `"name":5`), modernHeaders("tools/call", "5"), http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params.name"},
		{"version header missing", call, with(modernHeaders("tools/call", "echo"), headerProtocol, ""), http.StatusBadRequest, codeHeaderMismatch, "MCP-Protocol-Version header is required"},
		{"version header differs", call, with(modernHeaders("tools/call", "echo"), headerProtocol, "2025-11-25"), http.StatusBadRequest, codeHeaderMismatch, "does not match"},
		{"version meta missing", modernBody("tools/call", "", `"name":"echo"`), modernHeaders("tools/call", "echo"), http.StatusBadRequest, jsonrpc.CodeInvalidParams, "is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.seen())
			resp := s.post(t, tc.body, tc.hdr)
			if tc.status == http.StatusOK {
				require.Equal(t, http.StatusOK, resp.StatusCode)
				msg := readMessage(t, resp)
				assert.JSONEq(t, `7`, string(msg.ID))
				require.Nil(t, msg.Error)
				req := h.last()
				assert.Nil(t, req.Session)
				assert.Equal(t, "2026-07-28", req.Protocol)
				return
			}
			msg := requireRefused(t, resp, tc.status, tc.code, tc.hint)
			assert.JSONEq(t, `7`, string(msg.ID))
			assert.Len(t, h.seen(), before, "a refused request never reaches the Handler")
		})
	}
	assert.Zero(t, s.tr.Sessions())
}

func TestHTTPModernUnsupportedVersion(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	resp := s.post(t, modernBody("tools/list", "2099-01-01", ""),
		with(modernHeaders("tools/list", ""), headerProtocol, "2099-01-01"))
	msg := requireRefused(t, resp, http.StatusBadRequest, codeUnsupportedVersion, "2099-01-01")
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	require.NoError(t, json.Unmarshal(msg.Error.Data, &data))
	assert.Equal(t, protocol.Versions, data.Supported)
	assert.Equal(t, "2099-01-01", data.Requested)
	assert.Empty(t, h.seen())
}

func TestHTTPModernGetAndDeleteAreNotAllowed(t *testing.T) {
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{})
	id := s.initialize(t)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		resp := s.request(t, method, "", map[string]string{headerProtocol: "2026-07-28", headerSessionID: id, "Accept": "text/event-stream"})
		assert.Equal(t, http.MethodPost, resp.Header.Get("Allow"))
		requireRefused(t, resp, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "2026-07-28")
	}
	assert.Equal(t, 1, s.tr.Sessions(), "the session is untouched")
}

func TestHTTPModernErrorStatuses(t *testing.T) {
	h := newHTTPFake()
	h.handle = func(_ context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		code := jsonrpc.CodeMethodNotFound
		if req.Msg.Method == "tools/list" {
			code = codeMissingCapability
		}
		return jsonrpc.Failure(nil, jsonrpc.Errorf(code, "no"))
	}
	s := serveHTTP(t, h, HTTPOptions{})
	resp := s.post(t, modernBody("nope/nothing", "2026-07-28", ""), modernHeaders("nope/nothing", ""))
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeMethodNotFound, "no")
	resp = s.post(t, modernBody("tools/list", "2026-07-28", ""), modernHeaders("tools/list", ""))
	requireRefused(t, resp, http.StatusBadRequest, codeMissingCapability, "no")

	// The session generation answers errors with 200.
	id := s.initialize(t)
	resp = s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"nope/nothing"}`)
	requireRefused(t, resp, http.StatusOK, jsonrpc.CodeMethodNotFound, "no")
}

func TestHTTPModernNotificationsAndResponses(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	resp := s.post(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, map[string]string{headerProtocol: "2026-07-28"})
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	resp.Body.Close()
	assert.Equal(t, "notifications/roots/list_changed", recv(t, h.notified).Method)

	resp = s.post(t, `{"jsonrpc":"2.0","id":3,"result":{}}`, map[string]string{headerProtocol: "2026-07-28"})
	requireRefused(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "no client responses")
}
