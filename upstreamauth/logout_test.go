package upstreamauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

func TestLogout(t *testing.T) {
	var revoked atomic.Int32
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/revoke" {
			revoked.Add(1)
		}
	}))
	defer issuer.Close()

	srv := &config.Server{ID: "secured", URL: "https://mcp.example.com/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth}}
	store := oauth.NewStore(t.TempDir())
	grant := func(issuer, revocation string) *oauth.Grant {
		return &oauth.Grant{Server: srv.URL, Issuer: issuer, RevocationURL: revocation, ClientID: "c",
			TokenURL: "https://as.example.com/token", AccessToken: "at-" + issuer, RefreshToken: "rt-" + issuer}
	}
	require.NoError(t, store.Save(grant(issuer.URL, issuer.URL+"/revoke")))
	require.NoError(t, store.Save(grant("", "")))
	require.NoError(t, store.Save(grant("https://plain.example.com", "http://plain.example.com/revoke")))

	removed, warnings, err := Logout(context.Background(), store, srv)
	require.NoError(t, err)
	assert.Equal(t, 3, removed)
	assert.Equal(t, int32(2), revoked.Load(), "the refresh token, then the access token")
	require.Len(t, warnings, 2, "%q", warnings)
	assert.Contains(t, warnings, "the authorization server cannot revoke tokens; they stay valid there until they expire")
	assert.Contains(t, strings.Join(warnings, "\n"), "could not revoke the tokens at the authorization server https://plain.example.com")
	for _, w := range warnings {
		assert.NotContains(t, w, "at-", "no token in a warning")
		assert.NotContains(t, w, "rt-", "no token in a warning")
	}

	grants, err := store.LoadAll(srv.URL)
	require.NoError(t, err)
	assert.Empty(t, grants, "removed even where revocation failed")
	removed, warnings, err = Logout(context.Background(), store, srv)
	require.NoError(t, err)
	assert.Zero(t, removed)
	assert.Empty(t, warnings)
}
