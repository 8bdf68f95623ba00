package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// exchangeStore is the provider's storage (opStore) with RFC 8693 token
// exchange: an access token of the provider's own, the caller's, is
// exchanged by a confidential client for one whose audience is the one
// asked for, in the caller's name.
type exchangeStore struct {
	*opStore
	exMu      sync.Mutex
	exchanges []string // "subject audience" of every exchange
}

func (s *exchangeStore) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	if req.GetRequestedTokenType() == "" {
		req.SetRequestedTokenType(oidc.AccessTokenType)
	}
	if len(req.GetAudience()) != 1 || req.GetExchangeSubject() == "" {
		return oidc.ErrInvalidRequest().WithDescription("one audience and a subject are required")
	}
	return nil
}

func (s *exchangeStore) CreateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	s.exMu.Lock()
	defer s.exMu.Unlock()
	s.exchanges = append(s.exchanges, req.GetSubject()+" "+strings.Join(req.GetAudience(), ","))
	return nil
}

func (s *exchangeStore) GetPrivateClaimsFromTokenExchangeRequest(context.Context, op.TokenExchangeRequest) (map[string]any, error) {
	return nil, nil
}

func (s *exchangeStore) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return nil
}

// VerifyExchangeSubjectToken accepts the access tokens the test mints with
// the provider's key (op's own verifier may take them first).
func (s *exchangeStore) VerifyExchangeSubjectToken(_ context.Context, token string, _ oidc.TokenType) (string, string, map[string]any, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return &s.key.PublicKey, nil },
		jwt.WithIssuer(s.issuer), jwt.WithValidMethods([]string{"RS256"}))
	if err != nil {
		return "", "", nil, err
	}
	sub, _ := claims["sub"].(string)
	return token, sub, claims, nil
}

func (s *exchangeStore) VerifyExchangeActorToken(context.Context, string, oidc.TokenType) (string, string, map[string]any, error) {
	return "", "", nil, errors.New("no actor tokens")
}

func (s *exchangeStore) exchangesMade() []string {
	s.exMu.Lock()
	defer s.exMu.Unlock()
	return append([]string(nil), s.exchanges...)
}

// startExchangeServer starts zitadel's provider over an exchangeStore.
func startExchangeServer(t *testing.T) (*authServer, *exchangeStore) {
	t.Helper()
	return startExchangeServerOver(t, func(s *exchangeStore) op.Storage { return s })
}

// startExchangeServerOver starts zitadel's provider over the storage
// storage makes of an exchangeStore.
func startExchangeServerOver(t *testing.T, storage func(*exchangeStore) op.Storage) (*authServer, *exchangeStore) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	store := &exchangeStore{opStore: newOPStore(key)}
	store.lifetime = time.Hour // one exchange serves the whole test
	as := &authServer{t: t, store: store.opStore}
	mux := http.NewServeMux()
	srv := httptest.NewServer(as.recordRequests(mux))
	t.Cleanup(srv.Close)
	as.issuer, store.issuer = srv.URL, srv.URL
	as.provider, err = op.NewOpenIDProvider(as.issuer, &op.Config{
		CryptoKey: sha256.Sum256([]byte("integration")), CodeMethodS256: true,
		SupportedUILocales: []language.Tag{language.English},
	}, storage(store), op.WithAllowInsecure())
	require.NoError(t, err)
	mux.HandleFunc("/.well-known/oauth-authorization-server", as.metadata)
	mux.Handle("/", as.provider)
	return as, store
}

// mintFor signs an access token to the gateway for subject, with the
// provider's key, as the provider would issue it.
func mintFor(t *testing.T, as *authServer, subject, client string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": as.issuer, "aud": []string{gatewayAudience}, "sub": subject,
		"client_id": client, "scope": "openid mcp", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "jti": randomID()})
	tok.Header["kid"] = "test-key"
	s, err := tok.SignedString(as.store.key)
	require.NoError(t, err)
	return s
}

// TestTokenExchange: a server with auth: token_exchange is sent, for each
// caller, a token the gateway's issuer (zitadel's provider) issued for the
// server's audience in the caller's name; one exchange serves a caller's
// many calls; no token reaches the log.
func TestTokenExchange(t *testing.T) {
	t.Parallel()
	as, store := startExchangeServer(t)
	const gwSecret = "gw-secret-4e2a9c71"
	as.store.addConfidentialClient("mcp-gateway", gwSecret)
	up := newWhoami(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	a := startAggregator(t, httpTransport, aggregatorOptions{env: []string{"GW_SECRET=" + gwSecret}, configs: []string{writeConfig(t,
		crmConfig(as.issuer, up.url, exchangeAuth()...)+fmt.Sprintf("audit: {to: %q}\n", auditPath))}})
	a.waitLoaded()

	// upstreamToken is the bearer token the upstream saw for caller c,
	// verified with the provider's key.
	upstreamToken := func(c *client) (string, jwt.MapClaims) {
		seen := up.seen(t, c, "whoami")
		require.Len(t, seen["Authorization"], 1, "the upstream got one bearer token")
		raw, ok := strings.CutPrefix(seen["Authorization"][0], "Bearer ")
		require.True(t, ok)
		claims := jwt.MapClaims{}
		_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return &as.store.key.PublicKey, nil },
			jwt.WithIssuer(as.issuer), jwt.WithAudience("https://crm.example.com"), jwt.WithValidMethods([]string{"RS256"}))
		require.NoError(t, err, "the upstream's token is the issuer's, for the upstream's audience")
		return raw, claims
	}

	aliceToken, bobToken := mintFor(t, as, "alice", "agent-a"), mintFor(t, as, "bob", "agent-a")
	alice, bob := a.connectAs(aliceToken), a.connectAs(bobToken)
	aliceUp, claims := upstreamToken(alice)
	assert.Equal(t, "alice", claims["sub"])
	assert.Equal(t, "mcp-gateway", claims["client_id"], "issued to the gateway's client")
	assert.NotEqual(t, aliceToken, aliceUp, "the caller's own token never reaches the upstream")
	for range 3 {
		again, _ := upstreamToken(alice)
		assert.Equal(t, aliceUp, again, "the exchanged token is kept")
	}
	bobUp, claims := upstreamToken(bob)
	assert.Equal(t, "bob", claims["sub"], "another user of the same client has a token of their own")
	assert.Equal(t, []string{"alice https://crm.example.com", "bob https://crm.example.com"}, store.exchangesMade(),
		"one exchange per caller for many calls")

	// Each exchange made leaves an audit line naming whose it was; the
	// calls served from the cache leave none.
	var exchanges []map[string]any
	for _, l := range auditLines(t, auditPath, 7) { // five calls, two exchanges
		if l["event"] == "token_exchange" {
			delete(l, "time")
			delete(l, "duration_ms")
			exchanges = append(exchanges, l)
		}
	}
	principal := func(sub string) map[string]any {
		return map[string]any{"kind": "subject", "issuer": as.issuer, "subject": sub, "client": "agent-a"}
	}
	line := func(sub string) map[string]any {
		return map[string]any{"event": "token_exchange", "method": "token_exchange", "server": "crm", "outcome": "ok",
			"principal": principal(sub), "bytes_in": float64(0), "bytes_out": float64(0)}
	}
	assert.ElementsMatch(t, []map[string]any{line("alice"), line("bob")}, exchanges)
	auditText, err := os.ReadFile(auditPath)
	require.NoError(t, err)

	log := a.log.String() + string(auditText)
	for name, secret := range map[string]string{"alice's token": aliceToken, "bob's token": bobToken,
		"alice's exchanged token": aliceUp, "bob's exchanged token": bobUp, "the client secret": gwSecret} {
		assert.NotContains(t, log, secret, "%s reached the log", name)
	}
}
