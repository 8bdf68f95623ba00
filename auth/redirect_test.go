package auth

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFetchRedirectsNeverDowngrade: the client that fetches the issuer's
// metadata and keys follows a redirect from https to https only, not to
// plain http (even on loopback, where it could reach the gateway host's
// own services); from an http loopback issuer, to loopback or https.
func TestFetchRedirectsNeverDowngrade(t *testing.T) {
	check := defaultClient().CheckRedirect
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		return r
	}
	from := func(u string) []*http.Request { return []*http.Request{req(u)} }
	assert.NoError(t, check(req("https://keys.example.com/jwks"), from("https://auth.example.com/.well-known/openid-configuration")))
	assert.Error(t, check(req("http://127.0.0.1:2375/info"), from("https://auth.example.com/.well-known/openid-configuration")),
		"https to plain http on loopback")
	assert.Error(t, check(req("http://keys.example.com/jwks"), from("https://auth.example.com/jwks")), "https to plain http")
	assert.NoError(t, check(req("http://localhost:9/jwks"), from("http://127.0.0.1:9/.well-known/openid-configuration")),
		"a loopback issuer in a test may redirect on loopback")
}
