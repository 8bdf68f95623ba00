package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	cred "github.com/mcp-aggregator/mcp-aggregator/credential"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

func TestUserLoginsSendEachCallerTheirOwnToken(t *testing.T) {
	var refreshes atomic.Int64
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refreshes.Add(1)
		require.NoError(t, r.ParseForm())
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("refresh_token") == "revoked" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "fresh-" + r.Form.Get("refresh_token"), "token_type": "Bearer", "expires_in": 3600})
	}))
	defer issuer.Close()
	seen := make(chan string, 8)
	refuse := atomic.Bool{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		if refuse.Load() {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer up.Close()

	key := make([]byte, 32)
	vault, err := cred.NewVault(t.TempDir(), key)
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	u := NewUserLogins(UserLoginsOptions{Vault: vault, Now: func() time.Time { return now }})
	srv := &config.Server{ID: "linear", URL: up.URL + "/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth, PerUser: true}}
	alice := &identity.Caller{Principal: identity.Subject("https://id.example.com", "alice"), Client: "agent"}
	bob := &identity.Caller{Principal: identity.Subject("https://id.example.com", "bob"), Client: "agent"}
	grant := func(access, refresh string, expiry time.Time) *Grant {
		return &Grant{Server: srv.URL, TokenURL: issuer.URL, ClientID: "c", AccessToken: access, RefreshToken: refresh, Expiry: expiry, Obtained: now.Add(-time.Hour)}
	}
	require.NoError(t, u.keep(cred.EntryOf(srv.ID, *alice), grant("alice-at", "alice-rt", now.Add(time.Hour))))

	rt, err := u.Transport(srv, http.DefaultTransport)
	require.NoError(t, err)
	client := &http.Client{Transport: rt}
	send := func(c *identity.Caller) error {
		ctx := context.Background()
		if c != nil {
			ctx = identity.WithCaller(ctx, *c)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	require.NoError(t, send(alice))
	assert.Equal(t, "Bearer alice-at", <-seen)
	err = send(bob)
	require.ErrorIs(t, err, ErrLoginRequired, "bob has not logged in")
	var need *LoginRequiredError
	require.ErrorAs(t, err, &need)
	assert.True(t, need.PerUser)
	require.NoError(t, send(nil))
	assert.Empty(t, <-seen, "a request no caller made carries no token")

	// Read back from the vault by a fresh instance, due for a refresh.
	now = now.Add(59 * time.Minute)
	u2 := NewUserLogins(UserLoginsOptions{Vault: vault, Now: func() time.Time { return now }})
	rt, err = u2.Transport(srv, http.DefaultTransport)
	require.NoError(t, err)
	client = &http.Client{Transport: rt}
	require.NoError(t, send(alice))
	assert.Equal(t, "Bearer fresh-alice-rt", <-seen)
	assert.Equal(t, int64(1), refreshes.Load())

	// A token the server refuses drops the login.
	refuse.Store(true)
	err = send(alice)
	require.ErrorIs(t, err, ErrLoginRequired)
	<-seen
	_, err = vault.Get(cred.EntryOf(srv.ID, *alice))
	assert.True(t, errors.Is(err, cred.ErrNotStored), "the refused login is gone")
}
