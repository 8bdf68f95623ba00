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

// TestUserLoginsSweepAndLogout: Sweep drops a login whose access token
// expired with no refresh token, and the stored logins unused for
// MaxUnused; Logout ends one caller's login and revokes it at the
// authorization server.
func TestUserLoginsSweepAndLogout(t *testing.T) {
	revoked := make(chan string, 4)
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		revoked <- r.Form.Get("token")
	}))
	defer issuer.Close()
	vault, err := cred.NewVault(t.TempDir(), make([]byte, 32))
	require.NoError(t, err)
	now := time.Now()
	u := NewUserLogins(UserLoginsOptions{Vault: vault, Now: func() time.Time { return now }, MaxUnused: 24 * time.Hour})
	srv := &config.Server{ID: "linear", URL: "https://mcp.example.com/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth, PerUser: true}}
	who := func(sub string) identity.Caller {
		return identity.Caller{Principal: identity.Subject("https://id.example.com", sub), Client: "agent"}
	}
	keep := func(sub, refresh string, expiry time.Time) {
		require.NoError(t, u.keep(cred.EntryOf(srv.ID, who(sub)), &Grant{Server: srv.URL, TokenURL: issuer.URL, RevocationURL: issuer.URL,
			ClientID: "c", AccessToken: sub + "-at", RefreshToken: refresh, Expiry: expiry, Obtained: now.Add(-time.Hour)}))
	}
	keep("alice", "", now.Add(-time.Minute))     // expired, nothing to renew it with
	keep("bob", "bob-rt", now.Add(-time.Minute)) // expired, renewable
	keep("carol", "", now.Add(time.Hour))        // valid
	n, err := u.Sweep()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "alice's dead login went")
	count, err := vault.Len()
	require.NoError(t, err)
	assert.Equal(t, 2, count)

	stored, err := u.Logout(context.Background(), srv, who("carol"))
	require.NoError(t, err)
	assert.True(t, stored)
	assert.Equal(t, "carol-at", <-revoked, "the access token was revoked")
	stored, err = u.Logout(context.Background(), srv, who("carol"))
	require.NoError(t, err)
	assert.False(t, stored, "logged out already")
	_, err = u.token(context.Background(), srv, who("carol"))
	var need *LoginRequiredError
	assert.ErrorAs(t, err, &need)

	// Unused for MaxUnused: gone from the vault and from memory.
	now = now.Add(25 * time.Hour)
	n, err = u.Sweep()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "bob's unused login went")
	count, err = vault.Len()
	require.NoError(t, err)
	assert.Zero(t, count)
	_, err = u.token(context.Background(), srv, who("bob"))
	assert.ErrorAs(t, err, &need, "bob logs in again")
}
