package auth

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOAuthTokenCannotTakeAStaticClientsName: with static tokens and OAuth
// together, an access token whose client_id or azp is the name of a static
// token's client is refused: it would otherwise choose that client's
// profile and place among the operators. A subject of that name is another
// principal: it is let in, and is not the static client.
func TestOAuthTokenCannotTakeAStaticClientsName(t *testing.T) {
	rs := rsaKey(t, "rsa-1")
	is := newTestIssuer(t, rs)
	g := New(Options{Tokens: map[string]string{"ci-bot": "ci-token-0123456789"},
		OAuth: &OAuth{Issuer: is.srv.URL, Audience: audience}, MinRefetch: time.Hour})

	for _, claims := range []jwt.MapClaims{
		{"client_id": "ci-bot"},
		{"client_id": nil, "azp": "ci-bot"},
	} {
		client, f := g.Authenticate(request(is.mint(t, rs, audience, claims)))
		require.NotNil(t, f, "a token naming %v is refused", claims)
		assert.Equal(t, 401, f.Status)
		assert.Contains(t, f.Message, "ci-bot")
		assert.Empty(t, client)
	}

	sub, f := g.Authenticate(request(is.mint(t, rs, audience, jwt.MapClaims{"client_id": nil, "sub": "ci-bot"})))
	require.Nil(t, f, "a subject named as a static client is a principal of its own")
	assert.Equal(t, identity.Subject(is.srv.URL, "ci-bot"), sub.Principal)
	assert.NotEqual(t, identity.Client("ci-bot"), sub.Principal)
	assert.Empty(t, sub.Client)

	client, f := g.Authenticate(request(is.mint(t, rs, audience, jwt.MapClaims{})))
	require.Nil(t, f)
	assert.Equal(t, "agent-1", client.Client, "other OAuth clients pass")
	client, f = g.Authenticate(request("ci-token-0123456789"))
	require.Nil(t, f)
	assert.Equal(t, identity.ClientCaller("ci-bot"), client, "the static token still names its client")
}
