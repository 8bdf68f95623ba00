package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// testIssuer is an authorization server for tests: RFC 8414 metadata (or
// only OpenID discovery) and a JWK Set whose keys a test can change.
type testIssuer struct {
	srv        *httptest.Server
	jwksCalls  atomic.Int64
	oidcOnly   bool
	claimIssue string // issuer the metadata names; the server's URL when ""

	mu   sync.Mutex
	keys []testKey
}

type testKey struct {
	kid    string
	signer crypto.Signer
	method jwt.SigningMethod
}

func newTestIssuer(t *testing.T, keys ...testKey) *testIssuer {
	t.Helper()
	is := &testIssuer{keys: keys}
	mux := http.NewServeMux()
	meta := func(w http.ResponseWriter, r *http.Request) {
		iss := is.claimIssue
		if iss == "" {
			iss = is.srv.URL
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": is.srv.URL + "/jwks"})
	}
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		if is.oidcOnly {
			http.NotFound(w, r)
			return
		}
		meta(w, r)
	})
	mux.HandleFunc("/.well-known/openid-configuration", meta)
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.jwksCalls.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		var set []map[string]string
		for _, k := range is.keys {
			set = append(set, jwkOf(k))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": set})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *testIssuer) publish(keys ...testKey) {
	is.mu.Lock()
	is.keys = keys
	is.mu.Unlock()
}

func rsaKey(t *testing.T, kid string) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return testKey{kid: kid, signer: k, method: jwt.SigningMethodRS256}
}

func ecKey(t *testing.T, kid string) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return testKey{kid: kid, signer: k, method: jwt.SigningMethodES256}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func jwkOf(k testKey) map[string]string {
	switch pub := k.signer.Public().(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": k.method.Alg(),
			"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
	case *ecdsa.PublicKey:
		size := (pub.Curve.Params().BitSize + 7) / 8
		return map[string]string{"kty": "EC", "kid": k.kid, "crv": pub.Curve.Params().Name,
			"x": b64(pub.X.FillBytes(make([]byte, size))), "y": b64(pub.Y.FillBytes(make([]byte, size)))}
	}
	panic("unknown key type")
}

// mint signs claims with k; the issuer, audience and lifetime default to
// good values for is and audience.
func (is *testIssuer) mint(t *testing.T, k testKey, audience string, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"iss": is.srv.URL, "aud": audience, "sub": "user-1", "client_id": "agent-1",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for name, v := range claims {
		if v == nil {
			delete(c, name)
			continue
		}
		c[name] = v
	}
	tok := jwt.NewWithClaims(k.method, c)
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.signer)
	require.NoError(t, err)
	return s
}
