package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// keyringRig is a keyring over a temporary store, with one stored grant
// whose refresh token the rig's token endpoint takes.
type keyringRig struct {
	store *Store
	k     *Keyring
	te    *tokenEndpoint
	srv   *config.Server
	now   time.Time
	mu    sync.Mutex
	// issuer is what the server names as its authorization server.
	issuer    string
	discovers int
}

// discover is KeyringOptions.Discover: the server names r.issuer.
func (r *keyringRig) discover(context.Context, *http.Client, *config.Server) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discovers++
	return r.issuer, nil
}

func newKeyringRig(t *testing.T, expired bool) *keyringRig {
	te, ts := newTokenEndpoint(t, "refresh-1")
	r := &keyringRig{store: NewStore(t.TempDir()), te: te, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), issuer: testIssuer}
	r.srv = &config.Server{ID: "linear", URL: "https://mcp.example/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth}}
	g := testGrant(r.srv.URL)
	g.TokenURL = ts.URL
	g.Obtained, g.Expiry = r.now.Add(-time.Hour), r.now.Add(time.Hour)
	if expired {
		g.Expiry = r.now.Add(-time.Minute)
	}
	require.NoError(t, r.store.Save(g))
	r.k = NewKeyring(KeyringOptions{Store: r.store, HTTPClient: ts.Client(), Discover: r.discover, Now: func() time.Time {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.now
	}})
	return r
}

func (r *keyringRig) token(t *testing.T, stale string) (string, error) {
	t.Helper()
	rt, err := r.k.Transport(r.srv, http.DefaultTransport)
	if err != nil {
		return "", err
	}
	return rt.(*bearer).cred.token(context.Background(), r.srv, stale)
}

func TestKeyringRefreshesOnceForManyCallers(t *testing.T) {
	r := newKeyringRig(t, true)
	r.te.hold = make(chan struct{})
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = r.token(t, "")
		}()
	}
	close(r.te.hold)
	wg.Wait()
	for _, tok := range got {
		assert.Equal(t, "access-x", tok)
	}
	assert.Equal(t, 1, r.te.refreshes(), "one refresh serves every caller")
	stored, err := r.store.Load(r.srv.URL, testIssuer)
	require.NoError(t, err)
	assert.Equal(t, "refresh-x", stored.RefreshToken, "the rotated refresh token is saved")
	assert.False(t, r.k.Sync(), "the keyring's own save is not a change")
}

func TestKeyringRefreshesBeforeExpiry(t *testing.T) {
	r := newKeyringRig(t, false)
	tok, err := r.token(t, "")
	require.NoError(t, err)
	assert.Equal(t, "access-1", tok)
	r.mu.Lock()
	r.now = r.now.Add(time.Hour - 30*time.Second) // within a minute of expiry
	r.mu.Unlock()
	tok, err = r.token(t, "")
	require.NoError(t, err)
	assert.Equal(t, "access-x", tok)
	tok, err = r.token(t, "access-x") // the server refused it: refresh again
	require.NoError(t, err)
	assert.Equal(t, "access-xx", tok)
}

func TestKeyringRefusedGrantNeedsLogin(t *testing.T) {
	r := newKeyringRig(t, true)
	r.te.mu.Lock()
	r.te.valid = map[string]bool{} // revoked
	r.te.mu.Unlock()
	_, err := r.token(t, "")
	require.ErrorIs(t, err, ErrLoginRequired)
	assert.Contains(t, err.Error(), "run `mcp-aggregator login linear`")
	problems := r.k.Problems([]*config.Server{r.srv})
	require.Len(t, problems, 1)
	assert.Equal(t, config.SeverityError, problems[0].Severity)
	assert.Contains(t, problems[0].String(), `server "linear": auth: the authorization server refused the stored refresh token (invalid_grant); run `+"`mcp-aggregator login linear`")
	_, err = r.k.Transport(r.srv, http.DefaultTransport)
	require.ErrorIs(t, err, ErrLoginRequired, "a new instance cannot start either")
	assert.Equal(t, 1, r.te.refreshes(), "a refused grant is not tried again")

	// A new login (from another process) clears it.
	g := testGrant(r.srv.URL)
	g.AccessToken, g.Expiry = "access-new", r.now.Add(time.Hour)
	require.NoError(t, r.store.Save(g))
	// The refusal re-reads the store in the background (the server may have
	// moved issuer), and that read may pick the new login up before Sync
	// does: either way it is in use once Sync returns.
	r.k.Sync()
	assert.Empty(t, r.k.Problems([]*config.Server{r.srv}))
	tok, err := r.token(t, "")
	require.NoError(t, err)
	assert.Equal(t, "access-new", tok)
}

func TestKeyringTakesAnotherProcessRefresh(t *testing.T) {
	r := newKeyringRig(t, true)
	_, err := r.k.Transport(r.srv, http.DefaultTransport) // loads the expired grant
	require.NoError(t, err)
	// Another aggregator sharing the store refreshed first.
	g := testGrant(r.srv.URL)
	g.AccessToken, g.RefreshToken, g.Expiry = "access-other", "refresh-other", r.now.Add(time.Hour)
	require.NoError(t, r.store.Save(g))
	tok, err := r.token(t, "")
	require.NoError(t, err)
	assert.Equal(t, "access-other", tok)
	assert.Equal(t, 0, r.te.refreshes(), "its grant is taken, no refresh of a spent token")
}

func TestKeyringNoLogin(t *testing.T) {
	k := NewKeyring(KeyringOptions{Store: NewStore(t.TempDir())})
	srv := &config.Server{ID: "notion", URL: "https://mcp.example/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth}}
	_, err := k.Transport(srv, http.DefaultTransport)
	var lr *LoginRequiredError
	require.ErrorAs(t, err, &lr)
	assert.Equal(t, "not logged in; run `mcp-aggregator login notion`", err.Error())
	assert.Empty(t, k.Problems([]*config.Server{srv}), "not logged in at start is the start failure's problem, not a second one")
}

func TestKeyringOtherClientID(t *testing.T) {
	r := newKeyringRig(t, false)
	r.srv.Auth.ClientID = "another"
	_, err := r.k.Transport(r.srv, http.DefaultTransport)
	require.ErrorIs(t, err, ErrLoginRequired)
	assert.Contains(t, err.Error(), "another client than auth.client_id")
}

// upstream records the Authorization headers it gets and refuses the
// tokens in reject with a 401.
type upstream struct {
	mu     sync.Mutex
	auth   []string
	bodies []string
	reject map[string]bool
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	defer u.mu.Unlock()
	h := r.Header.Get("Authorization")
	u.auth = append(u.auth, h)
	u.bodies = append(u.bodies, string(body))
	if u.reject[strings.TrimPrefix(h, "Bearer ")] {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// bearerClient points the rig's server at url, stores a valid grant for
// it and returns a client whose requests carry it.
func (r *keyringRig) bearerClient(t *testing.T, url string) *http.Client {
	t.Helper()
	r.srv.URL = url
	g := testGrant(r.srv.URL)
	g.TokenURL = r.te.url(t)
	g.Obtained, g.Expiry = r.now.Add(-time.Hour), r.now.Add(time.Hour)
	require.NoError(t, r.store.Save(g))
	rt, err := r.k.Transport(r.srv, http.DefaultTransport)
	require.NoError(t, err)
	return &http.Client{Transport: rt}
}

func TestBearerTransport(t *testing.T) {
	r := newKeyringRig(t, false)
	up := &upstream{reject: map[string]bool{}}
	mcpSrv := httptest.NewServer(up)
	t.Cleanup(mcpSrv.Close)
	other := &upstream{}
	otherSrv := httptest.NewServer(other)
	t.Cleanup(otherSrv.Close)
	client := r.bearerClient(t, mcpSrv.URL+"/mcp")

	post := func(url, body string) int {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer from-the-downstream-client")
		resp, err := client.Do(req)
		if err != nil {
			var lr *LoginRequiredError
			require.True(t, errors.As(err, &lr), "%v", err)
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 200, post(r.srv.URL, "one"))
	assert.Equal(t, []string{"Bearer access-1"}, up.auth)

	assert.Equal(t, 200, post(otherSrv.URL+"/elsewhere", "x"))
	assert.Equal(t, []string{""}, other.auth, "no token, and not the client's either, goes to another origin")

	up.mu.Lock()
	up.reject["access-1"] = true
	up.mu.Unlock()
	assert.Equal(t, 200, post(r.srv.URL, "two"), "a 401 is answered by a refresh and one retry")
	assert.Equal(t, []string{"Bearer access-1", "Bearer access-1", "Bearer access-x"}, up.auth)
	assert.Equal(t, []string{"one", "two", "two"}, up.bodies, "the retry sends the same body")

	up.mu.Lock()
	up.reject["access-x"], up.reject["access-xx"] = true, true
	up.mu.Unlock()
	assert.Equal(t, -1, post(r.srv.URL, "three"), "a fresh token refused too means a new login")
	assert.Len(t, r.k.Problems([]*config.Server{r.srv}), 1)
}

func TestOriginOf(t *testing.T) {
	a, _ := originOf("https://Example.com/mcp")
	b, _ := originOf("https://example.com:443/other")
	c, _ := originOf("http://example.com/mcp")
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
}

func TestBearerHoldsTheListenStreamUntilANewLogin(t *testing.T) {
	r := newKeyringRig(t, true)
	up := &upstream{reject: map[string]bool{}}
	mcpSrv := httptest.NewServer(up)
	t.Cleanup(mcpSrv.Close)
	r.srv.URL = mcpSrv.URL + "/mcp"
	g := testGrant(r.srv.URL)
	g.TokenURL, g.Expiry = r.te.url(t), r.now.Add(-time.Minute)
	require.NoError(t, r.store.Save(g))
	r.te.mu.Lock()
	r.te.valid = map[string]bool{} // revoked
	r.te.mu.Unlock()
	rt, err := r.k.Transport(r.srv, http.DefaultTransport)
	require.NoError(t, err)
	client := &http.Client{Transport: rt}

	resp, err := client.Post(r.srv.URL, "application/json", strings.NewReader("{}"))
	require.ErrorIs(t, err, ErrLoginRequired, "a POST fails at once")
	if resp != nil {
		resp.Body.Close()
	}

	got := make(chan int, 1)
	go func() {
		resp, err := client.Get(r.srv.URL)
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	select {
	case code := <-got:
		t.Fatalf("the GET stream ended (%d) instead of waiting for a login", code)
	case <-time.After(100 * time.Millisecond): // it is waiting; nothing else would tell
	}
	fresh := testGrant(r.srv.URL)
	fresh.AccessToken, fresh.Expiry = "access-relogged", r.now.Add(time.Hour)
	require.NoError(t, r.store.Save(fresh))
	require.True(t, r.k.Sync())
	select {
	case code := <-got:
		assert.Equal(t, http.StatusOK, code)
	case <-time.After(10 * time.Second):
		t.Fatal("the GET stream did not resume after the login")
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	assert.Equal(t, "Bearer access-relogged", up.auth[len(up.auth)-1])
}

func TestKeyringsSharingAStoreRefreshOnce(t *testing.T) {
	r := newKeyringRig(t, true)
	other := NewKeyring(KeyringOptions{Store: r.store, HTTPClient: r.k.opts.HTTPClient, Discover: r.discover, Now: r.k.opts.Now})
	r.te.hold = make(chan struct{})
	got := make(chan string, 2)
	for _, k := range []*Keyring{r.k, other} {
		go func() {
			rt, err := k.Transport(r.srv, http.DefaultTransport)
			if err != nil {
				got <- err.Error()
				return
			}
			tok, err := rt.(*bearer).cred.token(context.Background(), r.srv, "")
			if err != nil {
				tok = err.Error()
			}
			got <- tok
		}()
	}
	close(r.te.hold)
	assert.Equal(t, "access-x", <-got)
	assert.Equal(t, "access-x", <-got)
	assert.Equal(t, 1, r.te.refreshes(), "the second takes the first one's grant from the store")
}

// A server whose authorization server moved gets none of the old issuer's
// tokens; a login with the new one is taken up, and the old grant stays
// stored under its own issuer.
func TestKeyringFollowsTheServersIssuer(t *testing.T) {
	r := newKeyringRig(t, false)
	r.mu.Lock()
	r.issuer = "https://new-issuer.example"
	r.mu.Unlock()
	_, err := r.k.Transport(r.srv, http.DefaultTransport)
	require.ErrorIs(t, err, ErrLoginRequired, "the old issuer's grant is not used")
	assert.Contains(t, err.Error(), "not logged in with its authorization server https://new-issuer.example (the stored login is for https://issuer.example)")

	moved := testGrant(r.srv.URL)
	moved.Issuer, moved.AccessToken, moved.Expiry = "https://new-issuer.example/", "access-moved", r.now.Add(time.Hour)
	require.NoError(t, r.store.Save(moved))
	assert.True(t, r.k.Sync())
	tok, err := r.token(t, "")
	require.NoError(t, err)
	assert.Equal(t, "access-moved", tok)
	old, err := r.store.Load(r.srv.URL, testIssuer)
	require.NoError(t, err)
	assert.Equal(t, "access-1", old.AccessToken, "the old issuer's grant is left alone")
	r.mu.Lock()
	discovers := r.discovers
	r.mu.Unlock()
	assert.False(t, r.k.Sync(), "nothing changed")
	r.mu.Lock()
	assert.Equal(t, discovers, r.discovers, "a server with a usable grant is not asked again")
	r.mu.Unlock()
}

// The tokens a refresh replaces are handed to Retire, with the time after
// which they are of no use; the live ones never are.
func TestKeyringRetiresReplacedTokens(t *testing.T) {
	r := newKeyringRig(t, true)
	type retired struct {
		after  time.Time
		values []string
	}
	var mu sync.Mutex
	var got []retired
	var live []string
	r.k.opts.Secrets = func(values ...string) {
		mu.Lock()
		defer mu.Unlock()
		live = append(live, values...)
	}
	r.k.opts.Retire = func(after time.Time, values ...string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, retired{after, values})
	}
	tok, err := r.token(t, "")
	require.NoError(t, err)
	require.Equal(t, "access-x", tok)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []retired{
		{r.now.Add(retireMargin), []string{"access-1"}}, // expired already: now, plus the margin
		{r.now.Add(spentRefreshGrace), []string{"refresh-1"}},
	}, got)
	assert.Contains(t, live, "access-x")
	assert.Contains(t, live, "refresh-x")
}
