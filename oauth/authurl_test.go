package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// fakeAuthServer is an MCP server that needs OAuth and its authorization
// server on one loopback origin, the latter advertising authEndpoint (a
// path alone is on that origin).
func fakeAuthServer(t *testing.T, authEndpoint string) *httptest.Server {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if strings.HasPrefix(authEndpoint, "/") {
		authEndpoint = srv.URL + authEndpoint
	}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{srv.URL}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": srv.URL, "authorization_endpoint": authEndpoint, "token_endpoint": srv.URL + "/token",
			"code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"}})
	})
	return srv
}

// TestLoginOpensOnlyWebAuthorizationURLs: an authorization endpoint that is
// not a web address (a scheme that launches a local program) is never
// handed to the browser opener or to a client, and the login says why.
func TestLoginOpensOnlyWebAuthorizationURLs(t *testing.T) {
	for _, endpoint := range []string{"ms-msdt://localhost/id", "file://localhost/etc/passwd"} {
		t.Run(endpoint, func(t *testing.T) {
			srv := fakeAuthServer(t, endpoint)
			opened := ""
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Login(ctx, LoginOptions{
				Server:    &config.Server{ID: "remote", URL: srv.URL + "/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth, ClientID: "pre-registered"}},
				Authorize: func(u string) { opened = u },
				Timeout:   time.Second,
			})
			require.Error(t, err)
			assert.Empty(t, opened, "the URL was handed on to be opened")
			assert.Contains(t, err.Error(), "authorization")
		})
	}
}
