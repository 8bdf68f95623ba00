package auth

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOAuthTokenCannotTakeAStaticClientsName: with static tokens and OAuth
// together, an access token whose client_id, azp or sub is the name of a
// static token's client is refused: it would otherwise act as that client
// (its profile, its sessions and leases, its place among the operators).
func TestOAuthTokenCannotTakeAStaticClientsName(t *testing.T) {
	rs := rsaKey(t, "rsa-1")
	is := newTestIssuer(t, rs)
	g := New(Options{Tokens: map[string]string{"ci-bot": "ci-token-0123456789"},
		OAuth: &OAuth{Issuer: is.srv.URL, Audience: audience}, MinRefetch: time.Hour})

	for _, claims := range []jwt.MapClaims{
		{"client_id": "ci-bot"},
		{"client_id": nil, "azp": "ci-bot"},
		{"client_id": nil, "sub": "ci-bot"},
	} {
		client, f := g.Authenticate(request(is.mint(t, rs, audience, claims)))
		require.NotNil(t, f, "a token naming %v is refused", claims)
		assert.Equal(t, 401, f.Status)
		assert.Contains(t, f.Message, "ci-bot")
		assert.Empty(t, client)
	}

	client, f := g.Authenticate(request(is.mint(t, rs, audience, jwt.MapClaims{})))
	require.Nil(t, f)
	assert.Equal(t, "agent-1", client, "other OAuth clients pass")
	client, f = g.Authenticate(request("ci-token-0123456789"))
	require.Nil(t, f)
	assert.Equal(t, "ci-bot", client, "the static token still names its client")
}
