package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:9": true, "::1": true, "LOCALHOST": true,
		"10.0.0.1:80": false, "example.com": false, "attacker.example:80": false, "": false,
	} {
		assert.Equal(t, want, isLoopback(addr), addr)
	}
}

// TestHTTPEdgeEligible: only requests of an established, session-based
// session, with a JSON body and a proper Host, after the first load, are the
// edge's; everything else stays with mcp-go.
func TestHTTPEdgeEligible(t *testing.T) {
	p := New(Options{})
	t.Cleanup(func() { p.Close(context.Background()) })
	p.http.sessionStarted("s1")
	request := func(mut func(r *http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader("{}"))
		r.Host = "127.0.0.1:1"
		r.Header.Set("Mcp-Session-Id", "s1")
		r.Header.Set("MCP-Protocol-Version", "2025-11-25")
		r.Header.Set("Content-Type", "application/json")
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
		if mut != nil {
			mut(r)
		}
		return r
	}
	assert.False(t, p.http.eligible(request(nil)), "before the first load, mcp-go's gate applies")
	p.MarkLoaded()
	assert.True(t, p.http.eligible(request(nil)))
	for name, mut := range map[string]func(*http.Request){
		"no session":      func(r *http.Request) { r.Header.Del("Mcp-Session-Id") },
		"unknown session": func(r *http.Request) { r.Header.Set("Mcp-Session-Id", "nope") },
		"no version":      func(r *http.Request) { r.Header.Del("MCP-Protocol-Version") },
		"sessionless era": func(r *http.Request) { r.Header.Set("MCP-Protocol-Version", "2026-07-28") },
		"not JSON":        func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") },
		"rebinding Host":  func(r *http.Request) { r.Host = "attacker.example" },
	} {
		assert.False(t, p.http.eligible(request(mut)), name)
	}
	p.http.sessionEnded("s1")
	assert.False(t, p.http.eligible(request(nil)), "an ended session")
}
