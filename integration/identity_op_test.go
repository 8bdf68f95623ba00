package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// userStore is the provider's storage (opStore) issuing access tokens for
// the gateway's audience (a resource indicator) with each user's groups
// as a claim.
type userStore struct {
	*opStore
	groups map[string][]string // subject -> groups
}

// gatewayRequest is an authorization request whose tokens are for the
// gateway.
type gatewayRequest struct{ op.AuthRequest }

func (gatewayRequest) GetAudience() []string { return []string{gatewayAudience} }

func (s *userStore) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.opStore.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return gatewayRequest{r}, nil
}

func (s *userStore) GetPrivateClaimsFromScopes(_ context.Context, subject, _ string, _ []string) (map[string]any, error) {
	if g := s.groups[subject]; g != nil {
		return map[string]any{"groups": g}, nil
	}
	return nil, nil
}

// startUserServer starts zitadel's provider with one public client,
// clientID, whose users sign in with the code flow (userToken).
func startUserServer(t *testing.T, clientID string, groups map[string][]string) *authServer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	store := &userStore{opStore: newOPStore(key), groups: groups}
	as := &authServer{t: t, store: store.opStore}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	as.issuer, store.issuer = srv.URL, srv.URL
	store.clients[clientID] = &opClient{id: clientID, issuer: srv.URL, redirects: []string{"http://127.0.0.1/callback"}}
	as.provider, err = op.NewOpenIDProvider(as.issuer, &op.Config{
		CryptoKey: sha256.Sum256([]byte("integration")), CodeMethodS256: true,
		SupportedUILocales: []language.Tag{language.English},
	}, store, op.WithAllowInsecure())
	require.NoError(t, err)
	mux.HandleFunc("/.well-known/oauth-authorization-server", as.metadata)
	mux.Handle("/", as.provider)
	return as
}

// userToken signs subject in to clientID with the authorization code flow
// and PKCE, and returns the access token (a JWT) the provider issues.
func userToken(t *testing.T, as *authServer, clientID, subject string) string {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	location := func(u string) *url.URL {
		t.Helper()
		resp, err := noRedirect.Get(u)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusFound, resp.StatusCode, "%s: %s", u, body)
		loc, err := url.Parse(resp.Header.Get("Location"))
		require.NoError(t, err)
		return loc
	}
	const redirect = "http://127.0.0.1/callback"
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	login := location(as.issuer + "/authorize?" + url.Values{"client_id": {clientID}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"st"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"}}.Encode())
	id := login.Query().Get("id")
	require.True(t, as.store.approve(id, subject), "the login page names the request: %s", login)
	back := location(as.issuer + "/authorize/callback?id=" + url.QueryEscape(id))
	code := back.Query().Get("code")
	require.NotEmpty(t, code, "%s", back)
	resp, err := http.PostForm(as.issuer+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {redirect}, "client_id": {clientID}, "code_verifier": {verifier}})
	require.NoError(t, err)
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.NoError(t, json.Unmarshal(body, &tok))
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(tok.AccessToken, claims, func(*jwt.Token) (any, error) { return &as.store.key.PublicKey, nil },
		jwt.WithIssuer(as.issuer), jwt.WithAudience(gatewayAudience), jwt.WithValidMethods([]string{"RS256"}))
	require.NoError(t, err, "the provider's access token is a JWT for the gateway")
	require.Equal(t, subject, claims["sub"])
	require.Equal(t, clientID, claims["client_id"])
	return tok.AccessToken
}

// TestIdentityWithAuthorizationServer: with access tokens a real
// authorization server (zitadel's provider, trusted through its issuer
// and JWKS) issued to two users of one client, the users share no
// session, lease or counter; a subject named like a static token is
// another principal; a groups claim the server puts in the token chooses
// a profile.
func TestIdentityWithAuthorizationServer(t *testing.T) {
	t.Parallel()
	as := startUserServer(t, "agent-app", map[string][]string{"alice": {"staff", "auditors"}, "bob": {"staff"}})
	svcToken := randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, identityConfig(as.issuer,
		"  auditors: { match: { claim: groups, value: auditors }, servers: [counter, demo], tools: ['counter_*', 'demo_echo'] }\n", ""))},
		env: []string{"SVC_BOT_TOKEN=" + svcToken}})
	a.waitLoaded()
	alice, bob := userToken(t, as, "agent-app", "alice"), userToken(t, as, "agent-app", "bob")
	botSubject := userToken(t, as, "agent-app", "svc-bot")

	t.Run("sessionless counters", func(t *testing.T) {
		for i := 1; i <= 2; i++ {
			require.Equal(t, i, modernCallAs(t, a.url, alice, "counter_increment", ""))
		}
		assert.Equal(t, 1, modernCallAs(t, a.url, bob, "counter_increment", ""), "bob's counter is not alice's")
		assert.Equal(t, 3, modernCallAs(t, a.url, alice, "counter_increment", ""))
	})
	t.Run("named leases", func(t *testing.T) {
		require.Equal(t, 1, modernCallAs(t, a.url, alice, "counter_increment", "conv-1"))
		assert.Equal(t, 1, modernCallAs(t, a.url, bob, "counter_increment", "conv-1"), "the same lease name of another user is another lease")
		assert.Equal(t, 2, modernCallAs(t, a.url, alice, "counter_increment", "conv-1"))
	})
	t.Run("sessions", func(t *testing.T) {
		ac := a.connectAs(alice)
		require.Equal(t, 1, counterOf(t, ac.callToolResult("counter_increment", map[string]any{})))
		session := ac.wire.(*httpWire).session
		call := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "counter_increment", "arguments": map[string]any{}}}
		resp, body := rawPost(t, a.url, call, map[string]string{"Authorization": "Bearer " + bob,
			"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "bob's token must not drive alice's session: %s", body)
		assert.Equal(t, 2, counterOf(t, ac.callToolResult("counter_increment", map[string]any{})), "alice's session is untouched")
	})
	t.Run("namespaces apart", func(t *testing.T) {
		require.Equal(t, 1, modernCallAs(t, a.url, svcToken, "counter_increment", ""))
		assert.Equal(t, 1, modernCallAs(t, a.url, botSubject, "counter_increment", ""),
			"a subject named svc-bot is not the static token's client svc-bot")
		assert.Equal(t, 2, modernCallAs(t, a.url, svcToken, "counter_increment", ""))
	})
	t.Run("profile by groups claim", func(t *testing.T) {
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "counter_increment", "counter_get", "counter_pid", "demo_echo"},
			toolNames(t, a.connectAs(alice).listTools()), "alice's groups claim chooses the auditors profile")
		assert.Contains(t, toolNames(t, a.connectAs(bob).listTools()), "demo_add", "bob holds no such group")
	})
	log := a.log.String()
	for _, tok := range []string{alice, bob, botSubject, svcToken} {
		assert.False(t, strings.Contains(log, tok), "a token reached the log")
	}
}
