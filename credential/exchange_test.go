package credential

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenEndpoint is an RFC 8693 token endpoint for the tests: answer
// decides each answer from the request's form.
type tokenEndpoint struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func newTokenEndpoint(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *tokenEndpoint {
	te := &tokenEndpoint{}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		te.calls.Add(1)
		require.NoError(t, r.ParseForm())
		answer(w, r)
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": te.srv.URL, "token_endpoint": te.srv.URL + "/token"})
	})
	te.srv = httptest.NewServer(mux)
	t.Cleanup(te.srv.Close)
	return te
}

// grant answers with a token naming the subject token and audience.
func grant(w http.ResponseWriter, r *http.Request) {
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "up-" + r.Form.Get("subject_token") + "-" + r.Form.Get("audience"),
		"token_type": "Bearer", "issued_token_type": tokenTypeAccess, "expires_in": 600})
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func caller(sub, token string) identity.Caller {
	const iss = "https://issuer.example.com"
	return identity.Caller{Principal: identity.Subject(iss, sub), Client: "agent",
		Claims: map[string]any{"sub": sub, "iss": iss}, Token: identity.NewSecret(token)}
}

func TestExchangeRequestAndCache(t *testing.T) {
	var form, basic atomic.Value
	te := newTokenEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		form.Store(r.PostForm)
		id, secret, _ := r.BasicAuth()
		basic.Store(id + ":" + secret)
		grant(w, r)
	})
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	var heard []identity.Principal // Exchanged is called on the caller's goroutine
	ex := NewExchanger(ExchangeOptions{Server: "crm", Issuer: te.srv.URL, ClientID: "gw", ClientSecret: identity.NewSecret("gw-secret"),
		Audience: "https://crm.example.com", Scopes: []string{"a", "b"}, Now: clk.Now,
		Exchanged: func(c identity.Caller, _ time.Duration, err error) {
			assert.NoError(t, err)
			heard = append(heard, c.Principal)
		}})
	ctx := context.Background()

	tok, err := ex.Token(ctx, caller("alice", "alice-tok"))
	require.NoError(t, err)
	assert.Equal(t, "up-alice-tok-https://crm.example.com", tok.Reveal())
	got := map[string][]string(form.Load().(url.Values))
	assert.Equal(t, map[string][]string{"grant_type": {grantTokenExchange}, "subject_token": {"alice-tok"}, "subject_token_type": {tokenTypeAccess},
		"requested_token_type": {tokenTypeAccess}, "audience": {"https://crm.example.com"}, "scope": {"a b"}}, got)
	assert.Equal(t, "gw:gw-secret", basic.Load())

	for range 5 {
		again, err := ex.Token(ctx, caller("alice", "alice-tok"))
		require.NoError(t, err)
		assert.Equal(t, tok, again)
	}
	assert.Equal(t, int64(1), te.calls.Load(), "one exchange for many calls")

	_, err = ex.Token(ctx, caller("bob", "bob-tok"))
	require.NoError(t, err)
	assert.Equal(t, int64(2), te.calls.Load(), "another subject of the same client has a token of its own")

	clk.add(9 * time.Minute) // past a fifth of 10 minutes before expiry
	_, err = ex.Token(ctx, caller("alice", "alice-tok"))
	require.NoError(t, err)
	assert.Equal(t, int64(3), te.calls.Load(), "renewed before it expires")
	alice, bob := identity.Subject("https://issuer.example.com", "alice"), identity.Subject("https://issuer.example.com", "bob")
	assert.Equal(t, []identity.Principal{alice, bob, alice}, heard, "each exchange made is heard, no cached token")
}

func TestExchangeOneAtATime(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	te := newTokenEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		grant(w, r)
	})
	ex := NewExchanger(ExchangeOptions{TokenEndpoint: te.srv.URL + "/token", ClientID: "gw"})
	var wg sync.WaitGroup
	var started sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			_, err := ex.Token(context.Background(), caller("alice", "alice-tok"))
			errs <- err
		}()
	}
	started.Wait()
	<-arrived
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, int64(1), te.calls.Load(), "the callers waiting share the one exchange")
}

func TestExchangeFailureBacksOffAndShowsNoSecret(t *testing.T) {
	te := newTokenEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant",
			"error_description": "subject token " + r.Form.Get("subject_token") + " is revoked\r\n"})
	})
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	ex := NewExchanger(ExchangeOptions{TokenEndpoint: te.srv.URL + "/token", ClientID: "gw", ClientSecret: identity.NewSecret("gw-secret"), Now: clk.Now})
	_, err := ex.Token(context.Background(), caller("alice", "alice-tok-123"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid_grant")
	assert.NotContains(t, err.Error(), "alice-tok-123")
	assert.NotContains(t, err.Error(), "\n")

	_, err = ex.Token(context.Background(), caller("alice", "alice-tok-123"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "next attempt in 1s")
	assert.Equal(t, int64(1), te.calls.Load(), "no exchange while backing off")

	clk.add(time.Second)
	_, err = ex.Token(context.Background(), caller("alice", "alice-tok-123"))
	require.Error(t, err)
	assert.Equal(t, int64(2), te.calls.Load())
	_, err = ex.Token(context.Background(), caller("alice", "alice-tok-123"))
	assert.Contains(t, err.Error(), "next attempt in 2s", "the wait doubles")
}

func TestExchangeBoundsTheAnswer(t *testing.T) {
	te := newTokenEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"access_token":"` + strings.Repeat("x", maxExchangeBody) + `","token_type":"Bearer"}`))
	})
	ex := NewExchanger(ExchangeOptions{TokenEndpoint: te.srv.URL + "/token", ClientID: "gw"})
	_, err := ex.Token(context.Background(), caller("alice", "t"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "over 65536 bytes")
}

func TestExchangeNeedsAnAccessToken(t *testing.T) {
	ex := NewExchanger(ExchangeOptions{TokenEndpoint: "https://issuer.example.com/token", ClientID: "gw"})
	_, err := ex.Token(context.Background(), identity.ClientCaller("static-client"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no OAuth access token")
}

func TestExchangeTransport(t *testing.T) {
	te := newTokenEndpoint(t, grant)
	seen := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		if r.Header.Get("Authorization") == "" {
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer up.Close()
	ex := NewExchanger(ExchangeOptions{Issuer: te.srv.URL, ClientID: "gw", Audience: "crm"})
	origin := "http://" + strings.TrimPrefix(up.URL, "http://")
	client := &http.Client{Transport: ExchangeTransport(http.DefaultTransport, originOf(t, origin), ex)}
	send := func(ctx context.Context) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.URL, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer forged")
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	alice := identity.WithCaller(context.Background(), caller("alice", "alice-tok"))
	assert.Equal(t, http.StatusUnauthorized, send(alice))
	assert.Equal(t, "Bearer up-alice-tok-crm", <-seen)
	assert.Equal(t, http.StatusUnauthorized, send(alice))
	assert.Equal(t, "Bearer up-alice-tok-crm", <-seen)
	assert.Equal(t, int64(2), te.calls.Load(), "a token the upstream refused is exchanged again")
	assert.Equal(t, http.StatusOK, send(context.Background()))
	assert.Empty(t, <-seen, "no caller: no token, not even the one the request had")
}

// TestExchangeServiceToken: with Service, a request no caller made carries
// the aggregator's own token (client credentials, for the audience), kept
// apart from every caller's, and asked for again after a 401.
func TestExchangeServiceToken(t *testing.T) {
	var forms []url.Values
	var mu sync.Mutex
	te := newTokenEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		forms = append(forms, r.PostForm)
		n := len(forms)
		mu.Unlock()
		if r.Form.Get("grant_type") == grantClientCredentials {
			id, secret, _ := r.BasicAuth()
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "svc-" + id + "-" + secret + "-" + r.Form.Get("audience") + "-" + string(rune('0'+n)),
				"token_type": "Bearer", "expires_in": 600})
			return
		}
		grant(w, r)
	})
	seen := make(chan string, 8)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		if r.Header.Get("X-Refuse") != "" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer up.Close()
	ex := NewExchanger(ExchangeOptions{Issuer: te.srv.URL, ClientID: "gw", ClientSecret: identity.NewSecret("s3"),
		Audience: "https://crm.example.com", Service: true})
	client := &http.Client{Transport: ExchangeTransport(http.DefaultTransport, originOf(t, up.URL), ex)}
	send := func(ctx context.Context, refuse bool) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.URL, strings.NewReader("{}"))
		require.NoError(t, err)
		if refuse {
			req.Header.Set("X-Refuse", "1")
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, send(context.Background(), false))
	assert.Equal(t, "Bearer svc-gw-s3-https://crm.example.com-1", <-seen, "no caller: the aggregator's own token")
	assert.Equal(t, http.StatusOK, send(context.Background(), false))
	assert.Equal(t, "Bearer svc-gw-s3-https://crm.example.com-1", <-seen, "kept")
	alice := identity.WithCaller(context.Background(), caller("alice", "alice-tok"))
	assert.Equal(t, http.StatusOK, send(alice, false))
	assert.Equal(t, "Bearer up-alice-tok-https://crm.example.com", <-seen, "a caller's request carries the caller's own token")
	assert.Equal(t, http.StatusUnauthorized, send(context.Background(), true))
	<-seen
	assert.Equal(t, http.StatusOK, send(context.Background(), false))
	assert.Equal(t, "Bearer svc-gw-s3-https://crm.example.com-3", <-seen, "a refused token is asked for again")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, forms, 3)
	assert.Equal(t, url.Values{"grant_type": {"client_credentials"}, "audience": {"https://crm.example.com"},
		"resource": {"https://crm.example.com"}}, forms[0], "no subject token, no client secret in the form")

	plain := NewExchanger(ExchangeOptions{Issuer: te.srv.URL, ClientID: "gw"})
	_, err := plain.ServiceToken(context.Background())
	assert.ErrorContains(t, err, "auth.service")
}
