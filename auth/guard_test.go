package auth

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const audience = "https://gateway.example.com/mcp"

func request(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestStaticTokens(t *testing.T) {
	g := New(Options{Tokens: map[string]string{"ci-bot": "ci-token-0123456789", "laptop": "laptop-token-0123456789"}})
	tests := []struct {
		name, header string
		client       string
		status       int
		challenge    string
	}{
		{"good", "Bearer ci-token-0123456789", "ci-bot", 0, ""},
		{"other client", "bearer laptop-token-0123456789", "laptop", 0, ""},
		{"missing", "", "", 401, "Bearer"},
		{"other scheme", "Basic dXNlcjpwYXNz", "", 401, "Bearer"},
		{"wrong", "Bearer ci-token-0123456788", "", 401, `Bearer error="invalid_token", error_description="the bearer token is not valid"`},
		{"prefix of a token", "Bearer ci-token", "", 401, `Bearer error="invalid_token", error_description="the bearer token is not valid"`},
		{"not token68", "Bearer a b", "", 400, `Bearer error="invalid_request", error_description="the Authorization header must be one \"Bearer <token>\""`},
		{"empty", "Bearer ", "", 400, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := request("")
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			client, f := g.Authenticate(r)
			if tc.status == 0 {
				require.Nil(t, f)
				assert.Equal(t, identity.ClientCaller(tc.client), client)
				assert.True(t, client.Token.IsZero(), "a static token is no access token to pass on")
				return
			}
			require.NotNil(t, f)
			assert.Equal(t, tc.status, f.Status)
			if tc.challenge != "" {
				assert.Equal(t, strings.ReplaceAll(tc.challenge, `\"`, ""), f.Challenge)
			}
			assert.Empty(t, client)
		})
	}
	_, f := g.Authenticate(func() *http.Request {
		r := request("ci-token-0123456789")
		r.Header.Add("Authorization", "Bearer laptop-token-0123456789")
		return r
	}())
	require.NotNil(t, f, "two Authorization headers are refused")
	assert.Equal(t, 400, f.Status)
}

func newOAuthGuard(is *testIssuer, scopes ...string) *Guard {
	return New(Options{OAuth: &OAuth{Issuer: is.srv.URL, Audience: audience, RequiredScopes: scopes}, MinRefetch: time.Hour})
}

func TestOAuthTokens(t *testing.T) {
	rs, ec := rsaKey(t, "rsa-1"), ecKey(t, "ec-1")
	is := newTestIssuer(t, rs, ec)
	g := newOAuthGuard(is, "mcp")
	stranger := rsaKey(t, "rsa-1") // same kid, another key: a forged signature
	good := jwt.MapClaims{"scope": "openid mcp"}
	with := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"scope": "mcp"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	tests := []struct {
		name        string
		token       string
		client      string
		status      int
		description string
	}{
		{"RS256", is.mint(t, rs, audience, good), "agent-1", 0, ""},
		{"ES256", is.mint(t, ec, audience, good), "agent-1", 0, ""},
		{"azp when no client_id", is.mint(t, rs, audience, with(jwt.MapClaims{"client_id": nil, "azp": "web-app"})), "web-app", 0, ""},
		{"no client: the subject alone", is.mint(t, rs, audience, with(jwt.MapClaims{"client_id": nil})), "", 0, ""},
		{"aud list containing ours", is.mint(t, rs, audience, with(jwt.MapClaims{"aud": []string{"other", audience}})), "agent-1", 0, ""},
		{"scp list", is.mint(t, rs, audience, jwt.MapClaims{"scp": []string{"mcp"}}), "agent-1", 0, ""},
		{"expired", is.mint(t, rs, audience, with(jwt.MapClaims{"exp": time.Now().Add(-2 * time.Minute).Unix()})), "", 401, "the token has expired"},
		{"expired within leeway", is.mint(t, rs, audience, with(jwt.MapClaims{"exp": time.Now().Add(-5 * time.Second).Unix()})), "agent-1", 0, ""},
		{"no exp", is.mint(t, rs, audience, with(jwt.MapClaims{"exp": nil})), "", 401, "the token lacks a required claim (exp, iss or aud)"},
		{"not yet valid", is.mint(t, rs, audience, with(jwt.MapClaims{"nbf": time.Now().Add(10 * time.Minute).Unix()})), "", 401, "the token is not valid yet"},
		{"wrong audience", is.mint(t, rs, "https://other.example.com/mcp", good), "", 401, "the token is not meant for this resource (aud)"},
		{"wrong issuer", is.mint(t, rs, audience, with(jwt.MapClaims{"iss": "https://evil.example.com"})), "", 401, "the token is from another issuer (iss)"},
		{"bad signature", is.mint(t, stranger, audience, good), "", 401, "the token's signature is not valid"},
		{"no subject", is.mint(t, rs, audience, with(jwt.MapClaims{"sub": nil})), "", 401, "the token names no subject: it needs a sub claim of at most 256 characters"},
		{"insufficient scope", is.mint(t, rs, audience, jwt.MapClaims{"scope": "openid"}), "", 403, "the token lacks the scope mcp"},
		{"not a JWT", "abc.def.ghi", "", 401, "the token is not a well-formed JWT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, f := g.Authenticate(request(tc.token))
			if tc.status == 0 {
				require.Nil(t, f, "%+v", f)
				assert.Equal(t, tc.client, client.Client)
				assert.Equal(t, identity.Subject(is.srv.URL, "user-1"), client.Principal, "the principal is the token's issuer and subject")
				assert.Equal(t, tc.token, client.Token.Reveal(), "the verified token goes with its caller")
				assert.NotContains(t, fmt.Sprintf("%v %+v %#v", client, client, client), tc.token, "and never prints")
				return
			}
			require.NotNil(t, f)
			assert.Equal(t, tc.status, f.Status)
			assert.Equal(t, tc.description, f.Message)
			assert.Contains(t, f.Challenge, `resource_metadata="https://gateway.example.com/.well-known/oauth-protected-resource"`)
			if tc.status == 403 {
				assert.Contains(t, f.Challenge, `error="insufficient_scope"`)
				assert.Contains(t, f.Challenge, `scope="mcp"`)
			} else {
				assert.Contains(t, f.Challenge, `error="invalid_token"`)
				assert.Contains(t, f.Challenge, `scope="mcp"`, "what to ask for, also after a bad token")
			}
			assert.NotContains(t, f.Challenge, tc.token)
		})
	}
	assert.Equal(t, int64(1), is.jwksCalls.Load(), "the keys were fetched once for all these tokens")

	_, f := g.Authenticate(request(""))
	require.NotNil(t, f)
	assert.Equal(t, `Bearer resource_metadata="https://gateway.example.com/.well-known/oauth-protected-resource", scope="mcp"`, f.Challenge,
		"no credentials: no error code, the metadata and the scope to ask for")

	// A view's challenge names the view's own document (RFC 9728 §3.1);
	// a path that cannot be a view's, the gateway's.
	for path, want := range map[string]string{"/mcp/readonly": "/.well-known/oauth-protected-resource/mcp/readonly",
		"/mcp/a/b": "/.well-known/oauth-protected-resource", "/mcp/": "/.well-known/oauth-protected-resource"} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9"+path, nil)
		_, f := g.Authenticate(r)
		require.NotNil(t, f)
		assert.Contains(t, f.Challenge, `resource_metadata="https://gateway.example.com`+want+`"`, path)
	}
}

// unsigned builds a token with the given header, the claims and a signature.
func unsigned(header, claims map[string]any, sig []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestOAuthRefusesUnsafeAlgorithms(t *testing.T) {
	rs := rsaKey(t, "rsa-1")
	is := newTestIssuer(t, rs)
	g := newOAuthGuard(is)
	claims := map[string]any{"iss": is.srv.URL, "aud": audience, "client_id": "x", "exp": time.Now().Add(time.Hour).Unix()}

	_, f := g.Authenticate(request(unsigned(map[string]any{"alg": "none", "kid": "rsa-1"}, claims, nil)))
	require.NotNil(t, f, "alg none is refused")
	assert.Equal(t, 401, f.Status)

	// HS256 keyed with the public key, the classic confusion attack.
	pub := rs.signer.Public().(*rsa.PublicKey)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(claims))
	hs.Header["kid"] = "rsa-1"
	token, err := hs.SignedString(pub.N.Bytes())
	require.NoError(t, err)
	_, f = g.Authenticate(request(token))
	require.NotNil(t, f, "HS256 is refused")
	assert.Equal(t, 401, f.Status)
}

func TestOAuthUnknownKeyRefetchesOnceThenRateLimits(t *testing.T) {
	old, rotated, never, later := rsaKey(t, "k1"), rsaKey(t, "k2"), rsaKey(t, "k3"), rsaKey(t, "k4")
	is := newTestIssuer(t, old)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	g := New(Options{OAuth: &OAuth{Issuer: is.srv.URL, Audience: audience}, MinRefetch: time.Minute, Now: clock})

	_, f := g.Authenticate(request(is.mint(t, old, audience, nil)))
	require.Nil(t, f)
	require.Equal(t, int64(1), is.jwksCalls.Load())

	is.publish(old, rotated, later) // the issuer rotates in new keys
	advance(2 * time.Minute)
	client, f := g.Authenticate(request(is.mint(t, rotated, audience, nil)))
	require.Nil(t, f, "a token with a new kid makes the guard fetch the keys again")
	assert.Equal(t, "agent-1", client.Client)
	assert.Equal(t, int64(2), is.jwksCalls.Load(), "exactly one refetch")

	for range 5 {
		_, f = g.Authenticate(request(is.mint(t, never, audience, nil)))
		require.NotNil(t, f)
		assert.Equal(t, 401, f.Status)
		assert.Equal(t, "the token's signing key is not one the issuer publishes", f.Message)
	}
	assert.Equal(t, int64(2), is.jwksCalls.Load(), "unknown keys within MinRefetch cause no fetch")
	_, f = g.Authenticate(request(is.mint(t, later, audience, nil)))
	assert.Nil(t, f, "keys fetched with the refetch work at once")
	_, f = g.Authenticate(request(is.mint(t, old, audience, nil)))
	assert.Nil(t, f, "known keys keep working")

	advance(2 * time.Minute)
	_, f = g.Authenticate(request(is.mint(t, never, audience, nil)))
	require.NotNil(t, f)
	assert.Equal(t, int64(3), is.jwksCalls.Load(), "once MinRefetch has passed, an unknown key may cause one more fetch")
	_, f = g.Authenticate(request(is.mint(t, never, audience, nil)))
	require.NotNil(t, f)
	assert.Equal(t, int64(3), is.jwksCalls.Load())
}

func TestOAuthDiscovery(t *testing.T) {
	k := ecKey(t, "")
	t.Run("OpenID Connect fallback", func(t *testing.T) {
		is := newTestIssuer(t, k)
		is.oidcOnly = true
		client, f := newOAuthGuard(is).Authenticate(request(is.mint(t, k, audience, nil)))
		require.Nil(t, f, "%+v", f)
		assert.Equal(t, "agent-1", client.Client, "a token without kid uses the only key")
	})
	t.Run("metadata naming another issuer", func(t *testing.T) {
		is := newTestIssuer(t, k)
		is.claimIssue = "https://evil.example.com"
		_, f := newOAuthGuard(is).Authenticate(request(is.mint(t, k, audience, nil)))
		require.NotNil(t, f, "keys from metadata that names another issuer are not trusted")
		assert.Equal(t, 503, f.Status)
		assert.Equal(t, int64(0), is.jwksCalls.Load(), "the keys of a look-alike are not even fetched")
	})
	t.Run("metadata URLs", func(t *testing.T) {
		urls, err := metadataURLs("https://auth.example.com/tenant/1")
		require.NoError(t, err)
		assert.Equal(t, []string{
			"https://auth.example.com/.well-known/oauth-authorization-server/tenant/1",
			"https://auth.example.com/.well-known/openid-configuration/tenant/1",
			"https://auth.example.com/tenant/1/.well-known/openid-configuration",
		}, urls)
	})
}

func TestMetadataDocument(t *testing.T) {
	is := newTestIssuer(t)
	doc, ok := newOAuthGuard(is, "mcp", "files").Metadata()
	require.True(t, ok)
	assert.JSONEq(t, `{"resource":"`+audience+`","authorization_servers":["`+is.srv.URL+`"],"scopes_supported":["mcp","files"],
		"bearer_methods_supported":["header"],"resource_name":"mcp-aggregator"}`, string(doc))
	_, ok = New(Options{Tokens: map[string]string{"a": "b"}}).Metadata()
	assert.False(t, ok, "no metadata without OAuth")
}

func TestSame(t *testing.T) {
	o := Options{Tokens: map[string]string{"a": "t"}, OAuth: &OAuth{Issuer: "https://i", Audience: "x", RequiredScopes: []string{"mcp"}}}
	g := New(o)
	assert.True(t, g.Same(Options{Tokens: map[string]string{"a": "t"}, OAuth: &OAuth{Issuer: "https://i", Audience: "x", RequiredScopes: []string{"mcp"}}}))
	assert.False(t, g.Same(Options{Tokens: map[string]string{"a": "u"}, OAuth: o.OAuth}))
	assert.False(t, g.Same(Options{Tokens: o.Tokens}))
	assert.False(t, g.Same(Options{Tokens: o.Tokens, OAuth: &OAuth{Issuer: "https://i", Audience: "y"}}))
}

// TestSameComparesEveryOAuthField changes each field of OAuth in turn: a
// field Same forgot would let a reload keep a guard with stale settings.
func TestSameComparesEveryOAuthField(t *testing.T) {
	base := OAuth{Issuer: "https://i", Audience: "x", RequiredScopes: []string{"mcp"}}
	g := New(Options{OAuth: &base})
	v := reflect.ValueOf(base)
	for i := range v.NumField() {
		changed := base
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "-changed")
		case reflect.Slice:
			f.Set(reflect.Append(f, reflect.ValueOf("changed")))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", v.Type().Field(i).Name, f.Kind())
		}
		assert.False(t, g.Same(Options{OAuth: &changed}), "Same ignores OAuth.%s", v.Type().Field(i).Name)
	}
}

func TestOAuthIssuerDown(t *testing.T) {
	is := newTestIssuer(t, rsaKey(t, "k1"))
	token := is.mint(t, is.keys[0], audience, nil)
	is.srv.Close() // the issuer is unreachable from the start
	_, f := newOAuthGuard(is).Authenticate(request(token))
	require.NotNil(t, f)
	assert.Equal(t, http.StatusServiceUnavailable, f.Status, "no keys is the gateway's trouble, not the token's")
	assert.Empty(t, f.Challenge)
	assert.Equal(t, 10, f.RetryAfter)
	rec := httptest.NewRecorder()
	f.Write(rec)
	assert.Equal(t, "10", rec.Header().Get("Retry-After"))
	assert.Empty(t, rec.Header().Get("WWW-Authenticate"))
}

// TestNewFromKeepsTheIssuersKeys: a guard rebuilt for other static tokens keeps the
// keys the previous one fetched, so OAuth clients pass without a fetch, even while
// the issuer is unreachable; other OAuth settings fetch afresh.
func TestNewFromKeepsTheIssuersKeys(t *testing.T) {
	rs := rsaKey(t, "rsa-1")
	is := newTestIssuer(t, rs)
	opts := Options{Tokens: map[string]string{"ci-bot": "ci-token-0123456789"},
		OAuth: &OAuth{Issuer: is.srv.URL, Audience: audience, RequiredScopes: []string{"mcp"}}, MinRefetch: time.Hour}
	g := New(opts)
	token := is.mint(t, rs, audience, jwt.MapClaims{"scope": "mcp", "client_id": "jwt-client"})
	client, f := g.Authenticate(request(token))
	require.Nil(t, f, "%+v", f)
	assert.Equal(t, "jwt-client", client.Client)
	require.Equal(t, int64(1), is.jwksCalls.Load())

	is.srv.Close() // the issuer goes away
	opts.Tokens = map[string]string{"ci-bot": "ci-token-0123456789", "laptop": "laptop-token-0123456789"}
	next := NewFrom(g, opts)
	client, f = next.Authenticate(request(token))
	require.Nil(t, f, "a static token added must not cost the OAuth clients their keys: %+v", f)
	assert.Equal(t, "jwt-client", client.Client)
	client, f = next.Authenticate(request("laptop-token-0123456789"))
	require.Nil(t, f)
	assert.Equal(t, identity.ClientCaller("laptop"), client)

	opts.OAuth = &OAuth{Issuer: opts.OAuth.Issuer, Audience: "https://other.example.com/mcp", RequiredScopes: []string{"mcp"}}
	other := NewFrom(next, opts)
	_, f = other.Authenticate(request(token))
	require.NotNil(t, f, "another audience is another verifier, with keys of its own to fetch")
}
