package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// TestRemoteConfiguredHeadersStayWithTheServersOrigin: a remote server
// whose endpoint redirects (307) to another origin (here: another port of
// the same host, which Go's client alone treats as the same place) is
// followed, but its configured headers, API keys and a static
// Authorization among them, go to its own origin alone.
func TestRemoteConfiguredHeadersStayWithTheServersOrigin(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []http.Header
	fake := &fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
		writeJSON(w, req.ID, `{"content":[]}`)
	}}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	var ownMu sync.Mutex
	var own []http.Header
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ownMu.Lock()
		own = append(own, r.Header.Clone())
		ownMu.Unlock()
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(origin.Close)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	srv := &config.Server{ID: "remote", Transport: config.TransportHTTP, URL: origin.URL + "/mcp",
		Headers: map[string]string{"X-Api-Key": "key-0123456789", "Authorization": "Bearer static-0123456789"}}
	inst, err := Start(ctx, srv, Options{Logger: newLogRecorder().logger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	_, err = inst.CallTool(ctx, Call{Name: "t"})
	require.NoError(t, err)

	ownMu.Lock()
	require.NotEmpty(t, own)
	for _, h := range own {
		assert.Equal(t, "key-0123456789", h.Get("X-Api-Key"), "the server's own origin gets its headers")
	}
	ownMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen, "the redirect was not followed")
	for _, h := range seen {
		assert.Empty(t, h.Get("X-Api-Key"), "a configured header went to another origin")
		assert.Empty(t, h.Get("Authorization"), "a configured Authorization went to another origin")
	}
}
