package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startParamsRecorder starts an mcp-go streamable-HTTP server with one
// tool, t, that records the params of every tools/call it is sent, raw, as
// they came off the wire.
func startParamsRecorder(t *testing.T) (url string, seen func() []json.RawMessage) {
	t.Helper()
	up := server.NewMCPServer("params", "1.0.0")
	addTextTool(up, "t", "Answers ok.", "ok")
	url, params := startRecordingServer(t, up)
	return url, func() []json.RawMessage { return params("tools/call") }
}

// startRecordingServer serves up over streamable HTTP and records the
// params of every request it is sent, raw, as they came off the wire;
// params returns those of the requests of method so far.
func startRecordingServer(t *testing.T, up *server.MCPServer) (url string, params func(method string) []json.RawMessage) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen = map[string][]json.RawMessage{}
	)
	handler := server.NewStreamableHTTPServer(up)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method != "" {
			mu.Lock()
			seen[m.Method] = append(seen[m.Method], m.Params)
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", func(method string) []json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		return append([]json.RawMessage(nil), seen[method]...)
	}
}

// TestToolCallParamsReachTheUpstreamAsSent: a tools/call's params go
// upstream as the client sent them: a top-level member the aggregator does
// not know arrives, and _meta keeps its bytes (key order, big numbers)
// when nothing in it is the aggregator's; the aggregator's own keys (the
// lease key, the protocol's io.modelcontextprotocol/ keys) are taken out
// of it and the rest keep their order.
func TestToolCallParamsReachTheUpstreamAsSent(t *testing.T) {
	t.Parallel()
	url, seen := startParamsRecorder(t)
	a := serveConfig(t, httpTransport, fmt.Sprintf("version: 1\nservers:\n  params:\n    transport: streamable_http\n    url: %s\n", quoted(url)))
	a.waitLoaded()
	c := a.connect()

	meta := `{"zeta":{"b":2,"a":1},"example.com/trace":{"id":"t-1"},"alpha":123456789012345678901234567890}`
	sent := json.RawMessage(`{"x-client":{"keep":[1,"two",null]},"name":"t","arguments":{"q":"é"},"_meta":` + meta + `}`)
	res := c.mustRequest("tools/call", sent)
	require.Empty(t, string(res.Error))

	withheld := json.RawMessage(`{"name":"t","_meta":{"zeta":1,"mcp-aggregator/lease":"mine","io.modelcontextprotocol/x":{},"alpha":2},"arguments":{}}`)
	res = c.mustRequest("tools/call", withheld)
	require.Empty(t, string(res.Error))

	calls := seen()
	require.Len(t, calls, 2)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(calls[0], &got))
	assert.JSONEq(t, string(sent), string(calls[0]), "every member went up as sent")
	assert.Equal(t, meta, string(got["_meta"]), "_meta went up byte for byte")
	assert.JSONEq(t, `{"keep":[1,"two",null]}`, string(got["x-client"]), "a member the aggregator does not know went up")

	got = nil
	require.NoError(t, json.Unmarshal(calls[1], &got))
	assert.Equal(t, `{"zeta":1,"alpha":2}`, string(got["_meta"]), "the aggregator's keys are taken out, the others keep their order")
}
