package downstream

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// leaseCall is a sessionless tools/call naming lease in _meta ("" names none).
func leaseCall(lease string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	if lease != "" {
		meta += `,"` + MetaLease + `":"` + lease + `"`
	}
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + meta + `},"name":"echo","arguments":{}}}`
}

func TestHTTPLeaseHeaderMatchesMeta(t *testing.T) {
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{})
	for _, tc := range []struct {
		name   string
		lease  string // in _meta
		header *string
		ok     bool
	}{
		{"no header", "conv-1", nil, true},
		{"same", "conv-1", ptr("conv-1"), true},
		{"base64", "conv é", ptr("=?base64?" + base64.StdEncoding.EncodeToString([]byte("conv é")) + "?="), true},
		{"different", "conv-1", ptr("conv-2"), false},
		{"header without meta", "", ptr("conv-1"), false},
		{"empty header, meta set", "conv-1", ptr(""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := modernHeaders("tools/call", "echo")
			if tc.header != nil {
				h[HeaderLease] = *tc.header
			}
			resp := s.postRaw(t, leaseCall(tc.lease), h, tc.header != nil && *tc.header == "")
			if tc.ok {
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Nil(t, readMessage(t, resp).Error)
				return
			}
			msg := requireRefused(t, resp, http.StatusBadRequest, codeHeaderMismatch, "Mcp-Lease header does not match")
			if tc.header != nil && *tc.header != "" {
				assert.NotContains(t, msg.Error.Message, *tc.header, "a lease key is not echoed")
			}
		})
	}
}

func ptr(s string) *string { return &s }

// postRaw posts body with hdr, keeping a header whose value is empty when
// keepEmpty (request drops those).
func (s *httpServer) postRaw(t *testing.T, body string, hdr map[string]string, keepEmpty bool) *http.Response {
	t.Helper()
	if !keepEmpty {
		return s.post(t, body, hdr)
	}
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	return resp
}

func TestHTTPDrainRefusesNewState(t *testing.T) {
	release := make(chan struct{})
	h := newHTTPFake()
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		switch {
		case req.Msg.Method == "initialize":
			return &jsonrpc.Message{Result: []byte(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)}
		case req.Msg.Method == "tools/call" && req.Session != nil:
			<-release // a call in flight across the drain
		}
		res, _ := jsonrpc.Result(nil, map[string]string{"method": req.Msg.Method})
		return res
	}
	s := serveHTTP(t, h, HTTPOptions{LeaseHere: func(who identity.Principal, name string) bool { return who.IsZero() && name == "conv-1" }})
	id := s.initialize(t)
	// The answer may reach the client before its request stops counting.
	eventually(t, func() bool { return s.tr.InFlight() == 0 }, "initialize no longer in flight")

	// A call in flight when the drain begins.
	done := make(chan *http.Response, 1)
	go func() {
		done <- s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	}()
	eventually(t, func() bool { return s.tr.InFlight() == 1 }, "the call is in flight")

	assert.False(t, s.tr.Draining())
	s.tr.Drain()
	s.tr.Drain() // twice is once
	assert.True(t, s.tr.Draining())

	resp := s.post(t, initializeBody, nil)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Empty(t, resp.Header.Get(headerSessionID))
	requireRefused(t, resp, http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "draining")

	requireRefused(t, s.post(t, leaseCall(""), modernHeaders("tools/call", "echo")),
		http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "no requests without a lease")
	elsewhere := s.post(t, leaseCall("conv-2"), modernHeaders("tools/call", "echo"))
	assert.Equal(t, "1", elsewhere.Header.Get("Retry-After"))
	requireRefused(t, elsewhere, http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "no requests without a lease held here")
	leased := s.post(t, leaseCall("conv-1"), modernHeaders("tools/call", "echo"))
	require.Equal(t, http.StatusOK, leased.StatusCode, "a lease held here: served")
	assert.Nil(t, readMessage(t, leased).Error)

	// The open session goes on: its call finishes, and it may call again.
	close(release)
	r := <-done
	require.Equal(t, http.StatusOK, r.StatusCode)
	assert.Nil(t, readMessage(t, r).Error)
	again := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	require.Equal(t, http.StatusOK, again.StatusCode)
	readMessage(t, again)
	eventually(t, func() bool { return s.tr.InFlight() == 0 }, "nothing in flight")
	assert.Equal(t, 1, s.tr.Sessions())
}

func TestHTTPSessionIDPrefix(t *testing.T) {
	for _, p := range []string{"", "r1-", "eu.west_2"} {
		assert.True(t, ValidSessionIDPrefix(p), p)
	}
	for _, p := range []string{"r 1", "r1\n", strings.Repeat("x", 33), "é"} {
		assert.False(t, ValidSessionIDPrefix(p), p)
	}
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{SessionIDPrefix: "r1-"})
	id := s.initialize(t)
	require.Regexp(t, `^r1-[0-9a-f]{32}$`, id, "the label, then 128 random bits")
	assert.Equal(t, 1, s.tr.Sessions())
	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	requireRefused(t, s.sessionPost(t, "r1-"+strings.Repeat("0", 32), `{"jsonrpc":"2.0","id":3,"method":"ping"}`),
		http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
}

// FuzzLeaseHeader: whatever the body and the header, reading the lease
// never panics, and a request passes only when the header, decoded, is
// exactly the _meta key.
func FuzzLeaseHeader(f *testing.F) {
	f.Add([]byte(`{"_meta":{"mcp-aggregator/lease":"conv-1"}}`), "conv-1")
	f.Add([]byte(`{"_meta":{"mcp-aggregator/lease":"conv é"}}`), "=?base64?Y29udiDDqQ==?=")
	f.Add([]byte(`{"_meta":{"mcp-aggregator/lease":5}}`), "5")
	f.Add([]byte(`{"_meta":[]}`), "")
	f.Add([]byte(`[1,2]`), "x")
	f.Fuzz(func(t *testing.T, params []byte, header string) {
		r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
		require.NoError(t, err)
		_ = namesLease(params)
		assert.Nil(t, checkLeaseHeader(r, params), "no header: nothing to check")
		r.Header[HeaderLease] = []string{header}
		e := checkLeaseHeader(r, params)
		key, _ := stringMember(members(members(params)["_meta"]), MetaLease)
		if e == nil {
			decoded, ok := mcp.DecodeHeaderValue(header)
			assert.True(t, ok && decoded == key, "header %q passed against key %q", header, key)
		} else {
			assert.Equal(t, `the Mcp-Lease header does not match params._meta["mcp-aggregator/lease"]: send the same lease key in both, or leave the header out`,
				e.err.Message, "neither value is echoed")
		}
	})
}
