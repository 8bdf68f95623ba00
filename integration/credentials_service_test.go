package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// serviceStore is an exchangeStore that also grants confidential clients
// a token of their own (client credentials), for one audience.
type serviceStore struct {
	*exchangeStore
	audience string
}

// serviceClient is an opClient allowed the client credentials grant.
type serviceClient struct{ *opClient }

func (c serviceClient) GrantTypes() []oidc.GrantType {
	return append(c.opClient.GrantTypes(), oidc.GrantTypeClientCredentials)
}

func (s *serviceStore) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[id]; c != nil && c.secret != "" && c.secret == secret {
		return serviceClient{c}, nil
	}
	return nil, errors.New("no client with that id and secret")
}

func (s *serviceStore) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &opRefresh{subject: id, audience: []string{s.audience}, scopes: scopes}, nil
}

// TestTokenExchangeServiceCredential: a server that refuses every request
// without a valid token of the issuer for its audience (initialize, the
// lists, the GET stream, the DELETE) works behind auth.service:
// client_credentials: the requests no caller made carry the aggregator's
// own token, and each caller's call carries a token in the caller's name.
func TestTokenExchangeServiceCredential(t *testing.T) {
	t.Parallel()
	as, _ := startExchangeServerOver(t, func(s *exchangeStore) op.Storage {
		return &serviceStore{exchangeStore: s, audience: "https://crm.example.com"}
	})
	const gwSecret = "gw-secret-8d1f0b36"
	as.store.addConfidentialClient("mcp-gateway", gwSecret)

	var mu sync.Mutex
	seen := map[string][]string{} // subjects by method ("GET" for the stream)
	refused := 0
	up := newGuardedWhoami(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		method := r.Method
		if r.Method == http.MethodPost {
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			method = m.Method
		}
		raw, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		claims := jwt.MapClaims{}
		_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return &as.store.key.PublicKey, nil },
			jwt.WithIssuer(as.issuer), jwt.WithAudience("https://crm.example.com"), jwt.WithValidMethods([]string{"RS256"}))
		sub, _ := claims["sub"].(string)
		mu.Lock()
		defer mu.Unlock()
		if err != nil || (method == "tools/call" && sub == "mcp-gateway") {
			refused++
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "a valid token of a user is required", http.StatusUnauthorized)
			return false
		}
		seen[method] = append(seen[method], sub)
		return true
	}, nil)

	a := startAggregator(t, httpTransport, aggregatorOptions{env: []string{"GW_SECRET=" + gwSecret}, configs: []string{writeConfig(t,
		crmConfig(as.issuer, up.url, append(exchangeAuth("service: client_credentials"), "truely-stateless: true")...))}})
	a.waitLoaded()

	aliceToken, bobToken := mintFor(t, as, "alice", "agent-a"), mintFor(t, as, "bob", "agent-a")
	alice, bob := a.connectAs(aliceToken), a.connectAs(bobToken)
	assert.Contains(t, toolNames(t, alice.listTools()), "whoami", "the tool list was read with the aggregator's own token")
	for _, c := range []*client{alice, bob} {
		out := up.seen(t, c, "whoami")
		require.Len(t, out["Authorization"], 1)
		raw, _ := strings.CutPrefix(out["Authorization"][0], "Bearer ")
		claims := jwt.MapClaims{}
		_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return &as.store.key.PublicKey, nil })
		require.NoError(t, err)
		assert.NotEqual(t, "mcp-gateway", claims["sub"], "a call carries the caller's own token")
	}

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"mcp-gateway"}, seen["initialize"], "initialize carried the aggregator's own token")
	assert.Contains(t, seen["tools/list"], "mcp-gateway")
	assert.ElementsMatch(t, []string{"alice", "bob"}, seen["tools/call"])
	assert.Zero(t, refused, "no request went without a valid token")
	assert.NotContains(t, a.log.String(), gwSecret)
}

// TestPerUserLoginServiceLogin: a per-user server that refuses every
// request without a valid token (initialize, the lists, the GET stream)
// starts behind auth.service: login: the requests no caller made carry the
// aggregator's own login, made with `mcp-aggregator login`, while a
// caller's call never does: it needs the caller's own login.
func TestPerUserLoginServiceLogin(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "")
	up := startSecuredUpstream(t, as)
	_, env := loginHome(t)
	aliceToken := randomToken(t)
	port := freePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`version: 1
http:
  auth:
    tokens:
      alice: {env: ALICE_TOKEN}
    user_logins:
      key: {env: VAULT_KEY}
      callback: http://127.0.0.1:%d/oauth/callback
servers:
  secured:
    truely-stateless: true
    url: %s
    auth: {type: oauth, per_user: true, service: login}
    transform: [{prefix: sec_}]
`, port, up.url))
	env = append(env, "ALICE_TOKEN="+aliceToken, "VAULT_KEY="+strings.Repeat("ab", 32))
	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	require.Equal(t, 0, code, "login failed; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	before := up.sent() // the login's own requests, its probe without a token among them

	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{cfg}, env: env,
		flags: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	a.waitLoaded()
	alice := a.connectAs(aliceToken)
	assert.Contains(t, toolNames(t, alice.listTools()), "sec_whoami", "the server started on the aggregator's own login")
	started := up.sent()
	resp := alice.callTool("sec_whoami", map[string]any{})
	require.NotEmpty(t, resp.Error, "alice's call does not go with the aggregator's login: %s", resp.Result)
	var e struct{ Message string }
	require.NoError(t, json.Unmarshal(resp.Error, &e))
	assert.Contains(t, e.Message, "log in", "alice is asked to log in herself")
	up.mu.Lock()
	seen := map[string]bool{}
	for _, h := range up.seen[before:started] {
		seen[h] = true
	}
	up.mu.Unlock()
	// The server refuses any MCP request without a valid token, so the
	// tools listed above prove initialize and tools/list carried one; the
	// requests without one are the discovery of the stored login's issuer,
	// which asks the server for its challenge.
	delete(seen, "")
	assert.Len(t, seen, 1, "one token: the aggregator's own login's")
	// (Alice's call made none with a token: the requests after it are the
	// discovery of her login, which asks the server without one.)
	up.mu.Lock()
	for _, h := range up.seen[started:] {
		assert.Empty(t, h, "alice's call carried no one's token")
	}
	up.mu.Unlock()
}
