package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdingEndpoint puts a server before the rig's token endpoint, which
// rotates refresh tokens: each request is told on arrived, then waits
// until release is closed before the endpoint answers it. The stored grant
// is sent there.
func holdingEndpoint(t *testing.T, r *keyringRig, release <-chan struct{}) (arrived <-chan struct{}) {
	t.Helper()
	in := make(chan struct{}, 8)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		in <- struct{}{}
		<-release
		r.te.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)
	g, err := r.store.Load(r.srv.URL, testIssuer)
	require.NoError(t, err)
	g.TokenURL = ts.URL
	require.NoError(t, r.store.Save(g))
	return in
}

// startRefresh has the keyring start a refresh of the rig's expired grant,
// by a call that gives up at once: the refresh goes on without it.
func startRefresh(t *testing.T, r *keyringRig) *credential {
	t.Helper()
	rt, err := r.k.Transport(r.srv, http.DefaultTransport)
	require.NoError(t, err)
	c := rt.(*bearer).cred
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.token(gone, r.srv, "")
	require.ErrorIs(t, err, context.Canceled)
	return c
}

// storedRefreshToken is the refresh token the store holds for the rig.
func storedRefreshToken(t *testing.T, r *keyringRig) string {
	t.Helper()
	g, err := r.store.Load(r.srv.URL, testIssuer)
	require.NoError(t, err)
	return g.RefreshToken
}

// A refresh sent before the shutdown began has its answer, which spent the
// old refresh token at the issuer, saved before Close returns; after Close
// no refresh is sent.
func TestKeyringCloseSavesTheRefreshUnderWay(t *testing.T) {
	r := newKeyringRig(t, true)
	arrived := holdingEndpoint(t, r, r.k.opts.Refreshes.closing.Done()) // answered once the shutdown has begun
	c := startRefresh(t, r)
	<-arrived

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, r.k.Close(ctx))
	assert.Equal(t, "refresh-x", storedRefreshToken(t, r), "the rotated refresh token is saved")
	r.te.mu.Lock()
	assert.Equal(t, map[string]bool{"refresh-x": true}, r.te.valid, "the issuer takes the saved one alone")
	r.te.mu.Unlock()

	// A call whose token the server refuses gets no refresh now.
	_, err := c.token(context.Background(), r.srv, "access-x")
	require.ErrorIs(t, err, errClosed)
	assert.Contains(t, err.Error(), `server "linear"`)
	assert.Equal(t, 1, r.te.refreshes())
	// A token that is still good serves on.
	tok, err := c.token(context.Background(), r.srv, "")
	require.NoError(t, err)
	assert.Equal(t, "access-x", tok)
}

// A refresh not yet sent when the shutdown begins, here waiting for the
// store's lock that another process holds, is not sent: the stored refresh
// token stays good, and Close does not wait for the lock.
func TestKeyringCloseSendsNoRefreshNotYetSent(t *testing.T) {
	r := newKeyringRig(t, true)
	unlock, err := lockFile(context.Background(), r.store.lockPath(r.srv.URL))
	require.NoError(t, err)
	defer unlock()
	c := startRefresh(t, r) // waits for the lock

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, r.k.Close(ctx))
	assert.Zero(t, r.te.refreshes())
	assert.Equal(t, "refresh-1", storedRefreshToken(t, r))
	_, err = c.token(context.Background(), r.srv, "")
	require.ErrorIs(t, err, errClosed)
	assert.Contains(t, err.Error(), `server "linear"`)
	assert.Zero(t, r.te.refreshes())
}

// Close waits no longer than its context: it says so, and the refresh,
// which the process may yet finish, still saves what it gets.
func TestKeyringCloseIsBounded(t *testing.T) {
	r := newKeyringRig(t, true)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	arrived := holdingEndpoint(t, r, release)
	startRefresh(t, r)
	<-arrived

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, r.k.Close(ctx), context.Canceled)
	once.Do(func() { close(release) })
	r.k.opts.Refreshes.under.Wait()
	assert.Equal(t, "refresh-x", storedRefreshToken(t, r))
}

// Logins that share Refreshes close together: closing the per-user logins
// ends the keyring's refreshes too.
func TestRefreshesSharedCloseTogether(t *testing.T) {
	r := newKeyringRig(t, true)
	users := NewUserLogins(UserLoginsOptions{Refreshes: r.k.opts.Refreshes})
	require.NoError(t, users.Close(context.Background()))
	rt, err := r.k.Transport(r.srv, http.DefaultTransport)
	require.NoError(t, err)
	_, err = rt.(*bearer).cred.token(context.Background(), r.srv, "")
	require.ErrorIs(t, err, errClosed)
	assert.Zero(t, r.te.refreshes())
}
