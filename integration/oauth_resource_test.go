package integration

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOAuthLoginNamesTheServerWithoutItsCredentials: a server whose URL
// carries credentials (a user and password, a key in the query) is named
// to the authorization server by its canonical URI alone, the RFC 8707
// resource its protected resource metadata names: the login succeeds, and
// nothing the authorization server is sent holds any of the credentials.
func TestOAuthLoginNamesTheServerWithoutItsCredentials(t *testing.T) {
	t.Parallel()
	const user, password, key = "login-user-7c1e", "login-pass-93ab", "login-key-5d20"
	as := startAuthServer(t, true, "")
	up := startSecuredUpstream(t, as)
	home, env := loginHome(t)
	u, err := url.Parse(up.url)
	require.NoError(t, err)
	u.User = url.UserPassword(user, password)
	u.RawQuery = "api_key=" + key
	cfg := securedConfig(t, u.String())

	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	require.Equal(t, 0, code, "login failed; stdout:\n%s\nstderr:\n%s", stdout, stderr)

	named := append(as.store.notesOf("authorize"), as.store.notesOf("authorization_code")...)
	require.Len(t, named, 2, "one authorization request and one code exchange")
	for _, n := range named {
		assert.True(t, strings.HasPrefix(n, up.url+" "), "the resource is the server's canonical URI: %q", n)
	}
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	heard := as.requests()
	require.NotEmpty(t, heard)
	for _, r := range heard {
		for _, secret := range []string{user, password, key, basic, url.QueryEscape(u.String())} {
			assert.NotContains(t, r, secret, "the authorization server was sent a credential of the server's URL")
		}
	}
	grant := onlyGrant(t, home)
	assert.Equal(t, as.issuer, grant.Issuer, "the grant records the issuer the metadata named")
	assert.Equal(t, up.url, grant.Resource, "refreshes name the canonical URI too")
}
