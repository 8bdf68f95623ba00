package downstream

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// rawRequest sends a request to the MCP endpoint whose headers are set
// exactly, repeated ones included.
func (s *httpServer) rawRequest(t *testing.T, method, body string, hdr http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header = hdr
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	return resp
}

func TestHTTPRepeatedTransportHeadersAreRefused(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)
	call := modernBody("tools/call", "2026-07-28", `"name":"echo","arguments":{}`)
	base := func() http.Header {
		return http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"},
		}
	}
	for _, tc := range []struct {
		header string
		values []string
		body   string
		code   int
	}{
		// Headers protocol 2026-07-28 mirrors from the body: a malformed header.
		{"Mcp-Method", []string{"tools/call", "tools/list"}, call, codeHeaderMismatch},
		{"Mcp-Name", []string{"echo", "delete_everything"}, call, codeHeaderMismatch},
		{"Mcp-Protocol-Version", []string{"2026-07-28", "2025-11-25"}, call, codeHeaderMismatch},
		{"Mcp-Lease", []string{"a", "b"}, call, jsonrpc.CodeInvalidRequest},
		{"Mcp-Session-Id", []string{id, "another"}, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, jsonrpc.CodeInvalidRequest},
	} {
		t.Run(tc.header, func(t *testing.T) {
			hdr := base()
			if tc.header == "Mcp-Session-Id" {
				hdr = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}
			}
			hdr[tc.header] = tc.values
			requireRefused(t, s.rawRequest(t, http.MethodPost, tc.body, hdr), http.StatusBadRequest, tc.code,
				"the "+tc.header+" header appears 2 times: send it once")
		})
	}
	// Spelled in another case, the name is the same header.
	hdr := base()
	hdr["mcp-method"] = []string{"tools/list"}
	requireRefused(t, s.rawRequest(t, http.MethodPost, call, hdr), http.StatusBadRequest, codeHeaderMismatch, "appears 2 times")
	// The session generation has no HeaderMismatch.
	hdr = base()
	hdr["Mcp-Protocol-Version"] = []string{"2025-11-25"}
	hdr["Mcp-Method"] = []string{"tools/call", "tools/list"}
	requireRefused(t, s.rawRequest(t, http.MethodPost, call, hdr), http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "appears 2 times")
	// A GET stream and a DELETE name one session too.
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		requireRefused(t, s.rawRequest(t, method, "", http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {id, id}}),
			http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "appears 2 times")
	}
	assert.Equal(t, []string{"initialize"}, h.seen())
	assert.Equal(t, 1, s.tr.Sessions(), "the refused DELETE ended nothing")
}

func TestHTTPUnknownVersionHeaderIsUnsupported(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)
	for _, v := range []string{"garbage", "2099-01-01"} {
		for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
			t.Run(v+" "+method, func(t *testing.T) {
				body := ""
				if method == http.MethodPost {
					body = `{"jsonrpc":"2.0","id":4,"method":"ping"}`
				}
				resp := s.request(t, method, body, map[string]string{headerSessionID: id, headerProtocol: v, "Accept": "application/json, text/event-stream"})
				msg := requireRefused(t, resp, http.StatusBadRequest, codeUnsupportedVersion, "is not supported: use one of 2026-07-28, 2025-11-25")
				assert.JSONEq(t, `{"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"requested":"`+v+`"}`, string(msg.Error.Data))
			})
		}
	}
	assert.Equal(t, []string{"initialize"}, h.seen())
	assert.Equal(t, 1, s.tr.Sessions())
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestClientChosenValuesAreClippedInLogs(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)

	var stdioLog syncBuffer
	p := startStdio(t, newStdioHandler(), StdioOptions{Logger: slog.New(slog.NewTextHandler(&stdioLog, nil))})
	p.send(t, `{"jsonrpc":"2.0","id":"`+huge+`","result":{}}`)     // a response nothing awaits
	p.send(t, `{"jsonrpc":"2.0","id":"`+huge+`","method":"slow"}`) // in flight
	p.send(t, `{"jsonrpc":"2.0","id":"`+huge+`","method":"ping"}`) // the same id again
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	for {
		m := p.next(t)
		if string(m["id"]) == "1" {
			break
		}
	}
	assert.Less(t, len(stdioLog.String()), 8<<10, "stdio log: %.300s", stdioLog.String())
	assert.Contains(t, stdioLog.String(), "bytes)")

	var httpLog syncBuffer
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{Logger: slog.New(slog.NewTextHandler(&httpLog, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	id := s.initialize(t)
	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":"`+huge+`","result":{}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	resp = s.post(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{"Origin": "https://" + huge[:40<<10] + ".example"})
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Less(t, len(httpLog.String()), 8<<10, "HTTP log: %.300s", httpLog.String())
}
