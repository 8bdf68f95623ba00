package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modernRaw posts body as a 2026-07-28 request with the mirrored headers
// of method and name ("": none), plus extra ("" removes one), and reads
// the whole reply.
func modernRaw(t *testing.T, url, method, name, body string, extra http.Header) coreHTTPReply {
	t.Helper()
	return coreDo(t, modernHTTPRequest(t, context.Background(), url, method, name, body, extra))
}

// modernHTTPRequest is the request modernRaw posts, bound to ctx.
func modernHTTPRequest(t *testing.T, ctx context.Context, url, method, name, body string, extra http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header = http.Header{
		"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {modernVersion}, "Mcp-Method": {method},
	}
	if name != "" {
		req.Header["Mcp-Name"] = []string{name}
	}
	for k, v := range extra {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	return req
}

// modernError is the error of a JSON reply, compared as JSON: code and id.
func modernError(t *testing.T, r coreHTTPReply) (code int, id json.RawMessage, message string) {
	t.Helper()
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body, &m), "%s", r.body)
	require.NotNil(t, m.Error, "%s", r.body)
	return m.Error.Code, m.ID, m.Error.Message
}

// TestModernMoreRequestChecks: what protocol 2026-07-28 requires of a
// request, checked by the real binary over HTTP: client capabilities in
// _meta (-32602, 400), a method of the generation (-32601, 404), headers
// that are not repeated and that a header value can carry (-32020, 400);
// Last-Event-ID is ignored.
func TestModernMoreRequestChecks(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, demoToolsConfig())
	a.waitLoaded()
	const withCaps = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

	for _, tc := range []struct {
		name, method, header, body string
		extra                      http.Header
		status, code               int
		hint                       string
	}{
		{"no client capabilities", "tools/list", "",
			`{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			nil, http.StatusBadRequest, -32602, "clientCapabilities"},
		{"no protocol version in _meta", "tools/list", "",
			`{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			nil, http.StatusBadRequest, -32602, "protocolVersion"},
		{"ping", "ping", "", `{"jsonrpc":"2.0","id":11,"method":"ping","params":{` + withCaps + `}}`,
			nil, http.StatusNotFound, -32601, "server/discover"},
		{"initialize", "initialize", "", `{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"x","version":"1"},` + withCaps + `}}`,
			nil, http.StatusNotFound, -32601, "initialize"},
		{"resources/subscribe", "resources/subscribe", "file:///x", `{"jsonrpc":"2.0","id":11,"method":"resources/subscribe","params":{"uri":"file:///x",` + withCaps + `}}`,
			nil, http.StatusNotFound, -32601, "subscriptions/listen"},
		{"logging/setLevel", "logging/setLevel", "", `{"jsonrpc":"2.0","id":11,"method":"logging/setLevel","params":{"level":"debug",` + withCaps + `}}`,
			nil, http.StatusNotFound, -32601, "io.modelcontextprotocol/logLevel"},
		{"raw UTF-8 name", "tools/call", "démo", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"démo","arguments":{},` + withCaps + `}}`,
			nil, http.StatusBadRequest, -32020, "=?base64?"},
		{"repeated method", "tools/list", "", `{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{` + withCaps + `}}`,
			http.Header{"Mcp-Method": {"tools/list", "tools/call"}}, http.StatusBadRequest, -32020, "appears 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := modernRaw(t, a.url, tc.method, tc.header, tc.body, tc.extra)
			assert.Equal(t, tc.status, r.status, "%s", r.body)
			assert.Empty(t, r.header.Get("Mcp-Session-Id"), "no session in this generation")
			code, id, message := modernError(t, r)
			assert.Equal(t, tc.code, code, "%s", r.body)
			if tc.extra == nil {
				assert.JSONEq(t, `11`, string(id))
			}
			assert.Contains(t, message, tc.hint)
		})
	}

	r := modernRaw(t, a.url, "tools/list", "", `{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{`+withCaps+`}}`,
		http.Header{"Last-Event-ID": {"5"}})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	m := coreMessage(t, r)
	assert.JSONEq(t, `12`, string(m.ID))
	assert.Empty(t, m.Error)
	var list struct {
		ResultType string            `json:"resultType"`
		Tools      []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &list))
	assert.Equal(t, "complete", list.ResultType)
	assert.NotEmpty(t, list.Tools)
}

// TestModernMoreStdioRequestChecks: over stdio, a 2026-07-28 request
// without client capabilities is -32602 and one of a method that
// generation lacks is -32601; the connection goes on.
func TestModernMoreStdioRequestChecks(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, demoToolsConfig())
	a.waitLoaded()
	lines := bufio.NewReader(a.stdout)
	send := func(line string) message {
		t.Helper()
		_, err := a.stdin.Write([]byte(line + "\n"))
		require.NoError(t, err)
		raw, err := lines.ReadBytes('\n')
		require.NoError(t, err)
		var m message
		require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
		return m
	}
	m := send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	assert.JSONEq(t, `1`, string(m.ID))
	assert.Equal(t, -32602, coreErrorCode(m.Error), "%s", m.Error)
	m = send(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	assert.JSONEq(t, `2`, string(m.ID))
	assert.Equal(t, -32601, coreErrorCode(m.Error), "%s", m.Error)
	m = send(`{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	assert.JSONEq(t, `3`, string(m.ID))
	require.Empty(t, m.Error)
	var discover struct {
		ResultType        string   `json:"resultType"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &discover))
	assert.Equal(t, "complete", discover.ResultType)
	assert.Contains(t, discover.SupportedVersions, modernVersion)
}

// TestModernListenEndsGracefullyOnShutdown: a gateway that stops ends a
// subscriptions/listen stream with its final result, not by cutting it.
func TestModernListenEndsGracefullyOnShutdown(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, demoToolsConfig())
	a.waitLoaded()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := listenToolsChanged(t, ctx, a.url)
	ack, ok := <-events
	require.True(t, ok, "the listen stream closed")
	require.Contains(t, ack, "notifications/subscriptions/acknowledged")

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	var last string
	for ev := range events {
		last = ev
	}
	var final struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &final), "the stream's last event: %q", last)
	assert.JSONEq(t, `1`, string(final.ID), "the stream ends with the listen request's result: %s", last)
	assert.NotEmpty(t, final.Result, "%s", last)
}
