package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// headerRecorder is an MCP server that needs OAuth and keeps the headers
// of every request it gets.
type headerRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newHeaderRecorder(t *testing.T) *headerRecorder {
	r := &headerRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Clone())
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *headerRecorder) headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.seen...)
}

// TestProbeKeepsConfiguredHeadersToTheServersOrigin: the unauthorized
// request of a login or of issuer discovery carries the server's
// configured headers (API keys) to the server's own origin, redirects
// within it included, and to no other origin a redirect points to; the
// other origin here differs only by port, which Go's client alone would
// not tell apart.
func TestProbeKeepsConfiguredHeadersToTheServersOrigin(t *testing.T) {
	other := newHeaderRecorder(t)
	var mu sync.Mutex
	var own []http.Header
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost { // the probe, not the well-known lookups
			mu.Lock()
			own = append(own, r.Header.Clone())
			mu.Unlock()
		}
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
		default:
			http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(origin.Close)

	srv := &config.Server{ID: "remote", URL: origin.URL + "/old", Auth: config.ServerAuth{Type: config.ServerAuthOAuth},
		Headers: map[string]string{"X-Api-Key": "key-0123456789", "Authorization": "Bearer static-0123456789"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := DiscoverIssuer(ctx, &http.Client{Timeout: 5 * time.Second}, srv)
	require.NoError(t, err)

	mu.Lock()
	require.Len(t, own, 2, "the probe and its redirect within the origin")
	for _, h := range own {
		assert.Equal(t, "key-0123456789", h.Get("X-Api-Key"), "a redirect within the origin keeps the configured headers")
	}
	mu.Unlock()
	got := other.headers()
	require.NotEmpty(t, got, "the redirect to the other origin was not followed")
	for _, h := range got {
		assert.Empty(t, h.Get("X-Api-Key"), "a configured header went to another origin")
		assert.Empty(t, h.Get("Authorization"), "a configured Authorization went to another origin")
	}
}

// TestLoginSendsTheCodeToNoOtherOrigin: a token endpoint that answers the
// code exchange with a 307 to another origin does not get the code, its
// verifier or the client's secret sent on there, and the login fails.
func TestLoginSendsTheCodeToNoOtherOrigin(t *testing.T) {
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"stolen","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(other.Close)
	srv := fakeAuthServer(t, "/authorize")
	mux := srv.Config.Handler.(*http.ServeMux)
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := url.Values{"code": {"code-0123456789"}, "state": {r.URL.Query().Get("state")}}
		http.Redirect(w, r, r.URL.Query().Get("redirect_uri")+"?"+q.Encode(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/token", http.StatusTemporaryRedirect)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Login(ctx, LoginOptions{
		Server: &config.Server{ID: "remote", URL: srv.URL + "/mcp",
			Auth: config.ServerAuth{Type: config.ServerAuthOAuth, ClientID: "pre-registered", ClientSecret: "s3cret-0123456789"}},
		Authorize: func(u string) {
			go func() {
				if resp, err := http.Get(u); err == nil {
					resp.Body.Close()
				}
			}()
		},
		Timeout: 5 * time.Second,
	})
	require.Error(t, err)
	assert.Zero(t, hits.Load(), "the code exchange went to the origin the token endpoint redirected to")
}

// TestBearerTokenStaysWithTheServersOriginOnRedirects: when the server's
// endpoint redirects to another origin (another port of the same host
// here), the request there carries no access token; a redirect within the
// origin keeps it.
func TestBearerTokenStaysWithTheServersOriginOnRedirects(t *testing.T) {
	r := newKeyringRig(t, false)
	other := &upstream{}
	otherSrv := httptest.NewServer(other)
	t.Cleanup(otherSrv.Close)
	own := &upstream{}
	mcpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/away":
			http.Redirect(w, req, otherSrv.URL+"/mcp", http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, req, "/mcp", http.StatusTemporaryRedirect)
		default:
			own.ServeHTTP(w, req)
		}
	}))
	t.Cleanup(mcpSrv.Close)
	client := r.bearerClient(t, mcpSrv.URL+"/mcp")
	for _, path := range []string{"/moved", "/away"} {
		resp, err := client.Post(mcpSrv.URL+path, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Equal(t, []string{"Bearer access-1"}, own.auth, "a redirect within the origin keeps the token")
	assert.Equal(t, []string{""}, other.auth, "the token went to another origin")
}
