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
)

// TestRemoteRedirectElsewhereKeepsTheBody: a remote server whose endpoint
// redirects (307) a request to another origin (here: another port of the
// same host, which Go's client alone treats as the same place) does not
// get it followed: the body (a call's arguments) is the user's, for the
// origin the config names. The start fails at once, naming both origins,
// and the other origin is sent nothing, its configured headers least of all.
func TestRemoteRedirectElsewhereKeepsTheBody(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
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
	_, err := Start(ctx, srv, Options{Logger: newLogRecorder().Logger()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), origin.URL+" redirected the request to "+other.URL+", another origin")
	assert.NotContains(t, err.Error(), "key-0123456789")

	ownMu.Lock()
	require.NotEmpty(t, own)
	for _, h := range own {
		assert.Equal(t, "key-0123456789", h.Get("X-Api-Key"), "the server's own origin gets its headers")
	}
	ownMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, seen, "a request went to another origin")
}
