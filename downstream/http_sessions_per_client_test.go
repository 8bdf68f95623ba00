package downstream

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// openAs initializes a session as client and returns its id.
func openAs(t *testing.T, s *httpServer, client string) string {
	t.Helper()
	resp := s.post(t, initializeBody, map[string]string{"X-Client": client})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	id := resp.Header.Get(headerSessionID)
	require.NotEmpty(t, id)
	return id
}

// A client at MaxSessionsPerClient gets 429 with Retry-After and an error
// naming the cap and what frees a place; other clients still open
// sessions, and once the client ends one with DELETE it opens another.
func TestHTTPSessionsPerClientAreCapped(t *testing.T) {
	h := newHTTPFake()
	s := serveAuthenticatedWith(t, h, HTTPOptions{MaxSessionsPerClient: 2})
	first := openAs(t, s, "alice")
	openAs(t, s, "alice")

	resp := s.post(t, initializeBody, map[string]string{"X-Client": "alice"})
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Empty(t, resp.Header.Get(headerSessionID), "a refused initialize opens no session")
	msg := requireRefused(t, resp, http.StatusTooManyRequests, jsonrpc.CodeInternalError, "maximum of 2 open sessions")
	assert.JSONEq(t, "1", string(msg.ID))
	for _, hint := range []string{"--max-sessions-per-client", "DELETE", `"alice"`} {
		assert.Contains(t, msg.Error.Message, hint)
	}
	assert.Equal(t, 2, s.tr.Sessions())

	openAs(t, s, "bob") // another client is not held back

	resp = s.request(t, http.MethodDelete, "", map[string]string{headerSessionID: first, "X-Client": "alice"})
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	openAs(t, s, "alice")
}

// Initializes that fail give their place back, and concurrent initializes
// of one client never open more than its cap together.
func TestHTTPSessionsPerClientCountsInitializesInFlight(t *testing.T) {
	h := newHTTPFake()
	release := make(chan struct{})
	var mu sync.Mutex
	fail := true
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		mu.Lock()
		f := fail
		mu.Unlock()
		if f {
			return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no"))
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &jsonrpc.Message{Result: []byte(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)}
	}
	s := serveAuthenticatedWith(t, h, HTTPOptions{MaxSessionsPerClient: 2})
	for range 3 { // failures hold no place
		resp := s.post(t, initializeBody, map[string]string{"X-Client": "alice"})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotNil(t, readMessage(t, resp).Error)
	}
	mu.Lock()
	fail = false
	mu.Unlock()

	const tries = 6
	statuses := make(chan int, tries)
	var wg sync.WaitGroup
	for range tries {
		wg.Go(func() {
			resp := s.post(t, initializeBody, map[string]string{"X-Client": "alice"})
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	// The refusals come at once; the two that hold a place wait in Handle.
	for range tries - 2 {
		assert.Equal(t, http.StatusTooManyRequests, recv(t, statuses))
	}
	close(release)
	wg.Wait()
	for range 2 {
		assert.Equal(t, http.StatusOK, recv(t, statuses))
	}
	assert.Equal(t, 2, s.tr.Sessions())
}

// Without authentication, with ClientsByAddress, the client is the address
// a session came from: its sessions count against the cap under that name.
// Without ClientsByAddress (a loopback bind) no unauthenticated client is
// told apart, and only MaxSessions bounds their sessions. A negative
// MaxSessionsPerClient is no cap of its own.
func TestHTTPSessionsPerClientCountsAddressesAndUncapped(t *testing.T) {
	s := serveAuthenticatedWith(t, newHTTPFake(), HTTPOptions{MaxSessionsPerClient: 1, MaxSessions: 3, ClientsByAddress: true})
	openAs(t, s, "")
	resp := s.post(t, initializeBody, nil)
	msg := requireRefused(t, resp, http.StatusTooManyRequests, jsonrpc.CodeInternalError, "address 127.0.0.1 holds its maximum of 1 open sessions")
	assert.Contains(t, msg.Error.Message, "--max-sessions-per-client")
	openAs(t, s, "alice") // an authenticated client is told apart from the address

	l := serveAuthenticatedWith(t, newHTTPFake(), HTTPOptions{MaxSessionsPerClient: 1, MaxSessions: 3})
	for range 3 {
		openAs(t, l, "")
	}
	resp = l.post(t, initializeBody, nil)
	requireRefused(t, resp, http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "--max-sessions")

	u := serveAuthenticatedWith(t, newHTTPFake(), HTTPOptions{MaxSessionsPerClient: -1, MaxSessions: 3})
	for range 3 {
		openAs(t, u, "alice")
	}
	assert.Equal(t, DefaultMaxSessionsPerClient, NewHTTP(newHTTPFake(), HTTPOptions{}).opts.MaxSessionsPerClient)
}
