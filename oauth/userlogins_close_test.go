package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	cred "github.com/mcp-aggregator/mcp-aggregator/credential"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// userLoginsRig is UserLogins over a vault holding alice's login to one
// server, whose refresh token is due, at an issuer that rotates refresh
// tokens and tells each request on arrived, then answers once release
// ends.
type userLoginsRig struct {
	u       *UserLogins
	srv     *config.Server
	alice   identity.Caller
	arrived chan struct{}
	mu      sync.Mutex
	valid   map[string]bool // the refresh tokens the issuer takes
	sent    int             // the refresh requests it was sent
}

func newUserLoginsRig(t *testing.T, release func(*UserLogins) <-chan struct{}) *userLoginsRig {
	r := &userLoginsRig{arrived: make(chan struct{}, 8), valid: map[string]bool{"rt-1": true}}
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.arrived <- struct{}{}
		<-release(r.u)
		_ = req.ParseForm()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sent++
		w.Header().Set("Content-Type", "application/json")
		if rt := req.Form.Get("refresh_token"); !r.valid[rt] {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		delete(r.valid, req.Form.Get("refresh_token"))
		r.valid["rt-2"] = true
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at-2", "refresh_token": "rt-2", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(issuer.Close)
	vault, err := cred.NewVault(t.TempDir(), make([]byte, 32))
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	r.u = NewUserLogins(UserLoginsOptions{Vault: vault, Now: func() time.Time { return now }})
	r.srv = &config.Server{ID: "linear", URL: "https://mcp.example/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth, PerUser: true}}
	r.alice = identity.Caller{Principal: identity.Subject("https://id.example.com", "alice"), Client: "agent"}
	require.NoError(t, r.u.keep(cred.EntryOf(r.srv.ID, r.alice), &Grant{Server: r.srv.URL, TokenURL: issuer.URL, ClientID: "c",
		AccessToken: "at-1", RefreshToken: "rt-1", Expiry: now.Add(-time.Minute), Obtained: now.Add(-time.Hour)}))
	return r
}

// storedRefreshToken is the refresh token the vault holds for alice.
func (r *userLoginsRig) storedRefreshToken(t *testing.T) string {
	t.Helper()
	data, err := r.u.opts.Vault.Get(cred.EntryOf(r.srv.ID, r.alice))
	require.NoError(t, err)
	var g Grant
	require.NoError(t, json.Unmarshal(data, &g))
	return g.RefreshToken
}

// A caller's refresh sent before the shutdown began is stored in the vault
// before Close returns, although the call that wanted it gave up; after
// Close none is sent.
func TestUserLoginsCloseStoresTheRefreshUnderWay(t *testing.T) {
	r := newUserLoginsRig(t, func(u *UserLogins) <-chan struct{} { return u.opts.Refreshes.closing.Done() })
	ctx, giveUp := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := r.u.token(ctx, r.srv, r.alice)
		gaveUp <- err
	}()
	<-r.arrived
	giveUp()
	require.ErrorIs(t, <-gaveUp, context.Canceled)

	closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, r.u.Close(closeCtx))
	assert.Equal(t, "rt-2", r.storedRefreshToken(t), "the rotated refresh token is stored")
	r.mu.Lock()
	assert.Equal(t, map[string]bool{"rt-2": true}, r.valid)
	r.mu.Unlock()

	// The stored login is good for another hour; one due now is not
	// refreshed.
	tok, err := r.u.token(context.Background(), r.srv, r.alice)
	require.NoError(t, err)
	assert.Equal(t, "at-2", tok)
	r.u.opts.Now = func() time.Time { return time.Unix(1_800_000_000, 0).Add(2 * time.Hour) }
	_, err = r.u.token(context.Background(), r.srv, r.alice)
	require.ErrorIs(t, err, errClosed)
	r.mu.Lock()
	assert.Equal(t, 1, r.sent)
	r.mu.Unlock()
}

// A refresh that waited for another finds the login stored meanwhile, due
// too, and refreshes with its refresh token, not with the one it read
// before waiting, which the issuer rotated away.
func TestUserLoginsRefreshWithTheLatestStoredToken(t *testing.T) {
	released := make(chan struct{})
	close(released)
	r := newUserLoginsRig(t, func(*UserLogins) <-chan struct{} { return released })
	e := cred.EntryOf(r.srv.ID, r.alice)
	stale, err := r.u.load(e)
	require.NoError(t, err)
	require.Equal(t, "rt-1", stale.RefreshToken)

	// Meanwhile rt-1 was spent for rt-9, whose access token is due too.
	now := r.u.opts.Now()
	newer := *stale
	newer.AccessToken, newer.RefreshToken, newer.Expiry = "at-9", "rt-9", now.Add(-time.Second)
	require.NoError(t, r.u.keep(e, &newer))
	r.mu.Lock()
	r.valid = map[string]bool{"rt-9": true}
	r.mu.Unlock()

	need := func(reason string) error { return &LoginRequiredError{Server: r.srv.ID, Reason: reason, PerUser: true} }
	tok, err := r.u.renew(e, stale, r.srv, r.alice, need)
	require.NoError(t, err, "refreshed with the stored refresh token")
	assert.Equal(t, "at-2", tok)
	assert.Equal(t, "rt-2", r.storedRefreshToken(t))
	<-r.arrived
}
