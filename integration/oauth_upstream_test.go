package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// The tests below put a remote MCP server that requires OAuth behind the
// aggregator. The authorization server is zitadel's OpenID provider (op)
// on loopback, over a small in-memory storage written here, plus the one
// thing op lacks: a dynamic client registration endpoint (RFC 7591). The
// MCP server is the official Go SDK's, behind the SDK's bearer-token
// middleware, which checks every JWT against the provider's keys and
// answers 401 with WWW-Authenticate resource_metadata otherwise.

// accessTokenLifetime is short, so that the tests see tokens expire.
const accessTokenLifetime = 5 * time.Second

// oauthSubject is the user the test consents as.
const oauthSubject = "alice"

// --- the authorization server -------------------------------------------

// authServer is a running OpenID provider.
type authServer struct {
	t        *testing.T
	issuer   string
	provider *op.Provider
	store    *opStore
	// iss is what the authorization response names as its issuer (RFC 9207),
	// which the metadata then says it sends: the issuer itself, or another
	// to play a mix-up attack.
	iss string
	// failRevoke makes the revocation endpoint answer 503.
	failRevoke atomic.Bool
	// failToken makes the token endpoint answer 503, with tokenRetryAfter
	// (a string) as Retry-After unless it is empty.
	failToken       atomic.Bool
	tokenRetryAfter atomic.Value
	// heard is every request the server was sent, whole (recordRequests).
	heardMu sync.Mutex
	heard   []string
}

// startAuthServer starts the provider; with sendIss, its authorization
// responses carry iss (RFC 9207), the issuer's own unless badIss is set.
func startAuthServer(t *testing.T, sendIss bool, badIss string) *authServer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	as := &authServer{t: t, store: newOPStore(key)}
	mux := http.NewServeMux()
	srv := httptest.NewServer(as.recordRequests(mux))
	t.Cleanup(srv.Close)
	as.issuer = srv.URL
	as.store.issuer = srv.URL
	if sendIss {
		as.iss = as.issuer
		if badIss != "" {
			as.iss = badIss
		}
	}
	as.provider, err = op.NewOpenIDProvider(as.issuer, &op.Config{
		CryptoKey: sha256.Sum256([]byte("integration")), CodeMethodS256: true, GrantTypeRefreshToken: true,
		SupportedUILocales: []language.Tag{language.English},
	}, as.store, op.WithAllowInsecure())
	require.NoError(t, err)

	mux.HandleFunc("/register", as.register)
	mux.HandleFunc("/login", as.consent)
	mux.HandleFunc("/.well-known/oauth-authorization-server", as.metadata)
	mux.Handle("/", as.recordResource(as.provider))
	return as
}

// metadata serves RFC 8414 metadata: op's discovery document with the
// registration endpoint added.
func (as *authServer) metadata(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	inner := r.Clone(r.Context())
	inner.URL.Path = "/.well-known/openid-configuration"
	as.provider.ServeHTTP(rec, inner)
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	doc["registration_endpoint"] = as.issuer + "/register"
	if as.iss != "" {
		doc["authorization_response_iss_parameter_supported"] = true
	}
	as.store.mu.Lock()
	if as.store.fetchClient != nil {
		doc["client_id_metadata_document_supported"] = true
	}
	as.store.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// recordRequests keeps every request as it came (its URL, headers and
// body), for tests that look for what must never be sent.
func (as *authServer) recordRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.RequestURI())
		_ = r.Header.Write(&b)
		b.Write(body)
		as.heardMu.Lock()
		as.heard = append(as.heard, b.String())
		as.heardMu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// requests is every request the server was sent, each whole.
func (as *authServer) requests() []string {
	as.heardMu.Lock()
	defer as.heardMu.Unlock()
	return append([]string(nil), as.heard...)
}

// recordResource notes the RFC 8707 resource parameter of every
// authorization and token request.
func (as *authServer) recordResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/authorize":
			as.store.note("authorize", r.URL.Query().Get("resource"), r.URL.Query().Get("code_challenge_method"))
		case "/oauth/token":
			if err := r.ParseForm(); err == nil {
				as.store.note(r.PostForm.Get("grant_type"), r.PostForm.Get("resource"), "")
			}
			if as.failToken.Load() {
				if after, _ := as.tokenRetryAfter.Load().(string); after != "" {
					w.Header().Set("Retry-After", after)
				}
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
				return
			}
		case "/revoke":
			if err := r.ParseForm(); err == nil {
				as.store.note("revoke", r.PostForm.Get("token_type_hint"), "")
			}
			if as.failRevoke.Load() {
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
				return
			}
		case "/authorize/callback":
			if as.iss != "" {
				w = issWriter{ResponseWriter: w, iss: as.iss}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// issWriter adds iss to the redirect that carries the authorization
// response, as an RFC 9207 authorization server does (op does not).
type issWriter struct {
	http.ResponseWriter
	iss string
}

func (w issWriter) WriteHeader(code int) {
	if u, err := url.Parse(w.Header().Get("Location")); err == nil && u.Query().Get("code") != "" {
		q := u.Query()
		q.Set("iss", w.iss)
		u.RawQuery = q.Encode()
		w.Header().Set("Location", u.String())
	}
	w.ResponseWriter.WriteHeader(code)
}

// register is a minimal RFC 7591 endpoint: public clients with loopback
// redirect URIs only, which is what the aggregator registers.
func (as *authServer) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		ClientName   string   `json:"client_name"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req) != nil || len(req.RedirectURIs) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_client_metadata"}`)
		return
	}
	for _, u := range req.RedirectURIs {
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_redirect_uri"}`)
			return
		}
	}
	c := as.store.addClient(req.RedirectURIs)
	as.store.note("register", req.ClientName, req.AuthMethod)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id": c.id, "redirect_uris": c.redirects, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"client_id_issued_at": time.Now().Unix(),
	})
}

// consent is the provider's login page: the user is alice, who approves.
func (as *authServer) consent(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if !as.store.approve(id, oauthSubject) {
		http.Error(w, "no such authorization request", http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, as.issuer+"/authorize/callback?id="+id, http.StatusFound)
}

// --- its storage ----------------------------------------------------------

type opStore struct {
	issuer string
	key    *rsa.PrivateKey
	mu     sync.Mutex
	// The state of the provider.
	clients  map[string]*opClient
	requests map[string]*opAuthRequest
	codes    map[string]string // code -> request id
	refresh  map[string]*opRefresh
	// What the tests look at.
	notes  []string    // "grant_type resource extra" of every request recorded
	issued []time.Time // expiry of every access token issued, in order
	// Every refresh token issued (by a login or a refresh), and every one
	// a refresh spent, in order.
	refreshIssued, refreshSpent []string
	// lifetime of the access tokens it issues; accessTokenLifetime if 0.
	lifetime time.Duration
	// fetchClient resolves a client_id that is a URL (a client ID metadata
	// document), which the metadata then says it takes; nil: none is.
	fetchClient func(ctx context.Context, id string) (op.Client, error)
}

func newOPStore(key *rsa.PrivateKey) *opStore {
	return &opStore{key: key, clients: map[string]*opClient{}, requests: map[string]*opAuthRequest{},
		codes: map[string]string{}, refresh: map[string]*opRefresh{}}
}

func randomID() string { return rand.Text() }

func (s *opStore) note(kind, value, extra string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, kind+" "+value+" "+extra)
}

func (s *opStore) notesOf(kind string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.notes {
		if strings.HasPrefix(n, kind+" ") {
			out = append(out, strings.TrimPrefix(n, kind+" "))
		}
	}
	return out
}

func (s *opStore) expiries() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.issued...)
}

func (s *opStore) addClient(redirects []string) *opClient {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &opClient{id: randomID(), redirects: redirects, issuer: s.issuer}
	s.clients[c.id] = c
	return c
}

func (s *opStore) approve(id, subject string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requests[id]
	if r == nil {
		return false
	}
	r.subject, r.done, r.authTime = subject, true, time.Now()
	return true
}

// refreshHistory is every refresh token issued, and every one a refresh
// spent, in order.
func (s *opStore) refreshHistory() (issued, spent []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refreshIssued...), append([]string(nil), s.refreshSpent...)
}

// hasRefresh reports whether token is a refresh token the provider takes.
func (s *opStore) hasRefresh(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refresh[token] != nil
}

// revokeRefreshTokens forgets every refresh token, as an administrator
// revoking the user's grants would.
func (s *opStore) revokeRefreshTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh = map[string]*opRefresh{}
}

func (s *opStore) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &opAuthRequest{id: randomID(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State, nonce: r.Nonce,
		scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.requests[req.id] = req
	return req, nil
}

func (s *opStore) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.requests[id]; r != nil {
		return r, nil
	}
	return nil, errors.New("no such authorization request")
}

func (s *opStore) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("no such code")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *opStore) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *opStore) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *opStore) accessToken() (string, time.Time) {
	life := s.lifetime
	if life == 0 {
		life = accessTokenLifetime
	}
	exp := time.Now().Add(life)
	s.issued = append(s.issued, exp)
	return randomID(), exp
}

func (s *opStore) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, exp := s.accessToken()
	return id, exp, nil
}

func (s *opStore) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := &opRefresh{subject: req.GetSubject(), audience: req.GetAudience(), scopes: req.GetScopes(), authTime: time.Now()}
	switch r := req.(type) {
	case *opAuthRequest:
		rt.clientID = r.clientID
	case *opRefresh:
		rt.clientID = r.clientID
	}
	if current != "" {
		if s.refresh[current] == nil {
			return "", "", time.Time{}, op.ErrInvalidRefreshToken
		}
		delete(s.refresh, current) // rotation: each refresh token is good once
		s.refreshSpent = append(s.refreshSpent, current)
	}
	token := randomID()
	s.refresh[token] = rt
	s.refreshIssued = append(s.refreshIssued, token)
	id, exp := s.accessToken()
	return id, token, exp, nil
}

func (s *opStore) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt := s.refresh[token]; rt != nil {
		return rt, nil
	}
	return nil, op.ErrInvalidRefreshToken
}

func (s *opStore) TerminateSession(context.Context, string, string) error { return nil }

func (s *opStore) RevokeToken(_ context.Context, token, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.refresh, token)
	return nil
}

func (s *opStore) GetRefreshTokenInfo(_ context.Context, _ string, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt := s.refresh[token]; rt != nil {
		return rt.subject, token, nil
	}
	return "", "", op.ErrInvalidRefreshToken
}

func (s *opStore) SigningKey(context.Context) (op.SigningKey, error) { return opKey{s.key}, nil }

func (s *opStore) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *opStore) KeySet(context.Context) ([]op.Key, error) { return []op.Key{opPublicKey{s.key}}, nil }

func (s *opStore) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	c, fetch := s.clients[id], s.fetchClient
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if fetch != nil && (strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://")) {
		return fetch(ctx, id)
	}
	return nil, errors.New("no such client")
}

// addConfidentialClient registers a client with a secret, as an
// administrator would before anyone logs in: its redirect URI is a
// loopback one, on any port (RFC 8252 §7.3).
func (s *opStore) addConfidentialClient(id, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[id] = &opClient{id: id, secret: secret, redirects: []string{"http://127.0.0.1/callback"}, issuer: s.issuer}
}

func (s *opStore) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[id]; c != nil && c.secret != "" && c.secret == secret {
		return nil
	}
	return errors.New("no client with that id and secret")
}

func (s *opStore) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *opStore) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return nil
}

func (s *opStore) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return nil
}

func (s *opStore) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *opStore) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("no client keys")
}

func (s *opStore) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *opStore) Health(context.Context) error { return nil }

type opKey struct{ key *rsa.PrivateKey }

func (k opKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k opKey) Key() any                                    { return k.key }
func (k opKey) ID() string                                  { return "test-key" }

type opPublicKey struct{ key *rsa.PrivateKey }

func (k opPublicKey) ID() string                         { return "test-key" }
func (k opPublicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k opPublicKey) Use() string                        { return "sig" }
func (k opPublicKey) Key() any                           { return &k.key.PublicKey }

// opClient is a dynamically registered public client, or a pre-registered
// confidential one (with a secret, sent with HTTP Basic).
type opClient struct {
	id, issuer, secret string
	redirects          []string
}

func (c *opClient) GetID() string                       { return c.id }
func (c *opClient) RedirectURIs() []string              { return c.redirects }
func (c *opClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *opClient) AuthMethod() oidc.AuthMethod {
	if c.secret != "" {
		return oidc.AuthMethodBasic
	}
	return oidc.AuthMethodNone
}
func (c *opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *opClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *opClient) LoginURL(id string) string            { return c.issuer + "/login?id=" + id }
func (c *opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *opClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *opClient) DevMode() bool                        { return false }
func (c *opClient) IsScopeAllowed(string) bool           { return true }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *opClient) ClockSkew() time.Duration             { return 0 }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

type opAuthRequest struct {
	id, clientID, redirectURI, state, nonce, subject string
	scopes                                           []string
	challenge                                        *oidc.CodeChallenge
	responseType                                     oidc.ResponseType
	responseMode                                     oidc.ResponseMode
	done                                             bool
	authTime                                         time.Time
}

func (r *opAuthRequest) GetID() string                         { return r.id }
func (r *opAuthRequest) GetACR() string                        { return "" }
func (r *opAuthRequest) GetAMR() []string                      { return []string{"pwd"} }
func (r *opAuthRequest) GetAudience() []string                 { return []string{r.clientID} }
func (r *opAuthRequest) GetAuthTime() time.Time                { return r.authTime }
func (r *opAuthRequest) GetClientID() string                   { return r.clientID }
func (r *opAuthRequest) GetCodeChallenge() *oidc.CodeChallenge { return r.challenge }
func (r *opAuthRequest) GetNonce() string                      { return r.nonce }
func (r *opAuthRequest) GetRedirectURI() string                { return r.redirectURI }
func (r *opAuthRequest) GetResponseType() oidc.ResponseType    { return r.responseType }
func (r *opAuthRequest) GetResponseMode() oidc.ResponseMode    { return r.responseMode }
func (r *opAuthRequest) GetScopes() []string                   { return r.scopes }
func (r *opAuthRequest) GetState() string                      { return r.state }
func (r *opAuthRequest) GetSubject() string                    { return r.subject }
func (r *opAuthRequest) Done() bool                            { return r.done }

type opRefresh struct {
	clientID, subject string
	audience, scopes  []string
	authTime          time.Time
}

func (r *opRefresh) GetAMR() []string                 { return []string{"pwd"} }
func (r *opRefresh) GetAudience() []string            { return r.audience }
func (r *opRefresh) GetAuthTime() time.Time           { return r.authTime }
func (r *opRefresh) GetClientID() string              { return r.clientID }
func (r *opRefresh) GetScopes() []string              { return r.scopes }
func (r *opRefresh) GetSubject() string               { return r.subject }
func (r *opRefresh) SetCurrentScopes(scopes []string) { r.scopes = scopes }

// --- the protected MCP server --------------------------------------------

// securedUpstream is an MCP server that takes only the provider's JWTs.
type securedUpstream struct {
	url      string // its MCP endpoint
	mu       sync.Mutex
	as       *authServer // whose tokens it takes, and names in its metadata
	verifier *op.AccessTokenVerifier
	seen     []string        // every Authorization header value, in order
	rejected map[string]bool // access tokens it refuses although they are valid
}

func startSecuredUpstream(t *testing.T, as *authServer) *securedUpstream {
	t.Helper()
	u := &securedUpstream{rejected: map[string]bool{}}
	u.moveTo(as)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"

	server := mcp.NewServer(&mcp.Implementation{Name: "secured", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Says whose token the call came with."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		u.mu.Lock()
		refused := u.rejected[token]
		verifier := u.verifier
		u.mu.Unlock()
		if refused {
			return nil, auth.ErrInvalidToken
		}
		claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](ctx, token, verifier)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: claims.Subject, Expiration: claims.Expiration.AsTime(), Scopes: claims.Scopes}, nil
	}
	metadataURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL})(handler)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Get("Authorization"))
		u.mu.Unlock()
		protected.ServeHTTP(w, r)
	}))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		issuer := u.as.issuer
		u.mu.Unlock()
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: u.url, AuthorizationServers: []string{issuer}, ScopesSupported: []string{"openid", "mcp"},
		}).ServeHTTP(w, r)
	}))
	return u
}

// moveTo makes as the server's authorization server: its metadata names
// as, and it takes as's tokens only.
func (u *securedUpstream) moveTo(as *authServer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.as = as
	u.verifier = op.NewAccessTokenVerifier(as.issuer, rp.NewRemoteKeySet(http.DefaultClient, as.issuer+"/keys"))
}

// lastToken is the last bearer token the server was sent.
func (u *securedUpstream) lastToken() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := len(u.seen) - 1; i >= 0; i-- {
		if tok, ok := strings.CutPrefix(u.seen[i], "Bearer "); ok {
			return tok
		}
	}
	return ""
}

// tokens are the distinct Authorization values the server was sent.
func (u *securedUpstream) headers() map[string]bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]bool{}
	for _, h := range u.seen {
		out[h] = true
	}
	return out
}

// sent is how many requests the server has had.
func (u *securedUpstream) sent() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// reject makes the server refuse token from now on.
func (u *securedUpstream) reject(token string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rejected[token] = true
}

// --- the tests -------------------------------------------------------------

// downstreamToken is what the test's own client sends the aggregator; it
// must never reach the upstream.
const downstreamToken = "downstream-client-token-must-stay-here"

type withAuthorization struct{ base http.RoundTripper }

func (w withAuthorization) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+downstreamToken)
	return w.base.RoundTrip(r)
}

// runLogin runs `mcp-aggregator login`, follows the authorization URL it
// prints as a browser would (the provider's pages redirect to its consent
// page, which redirects back to the command's loopback listener), and
// returns what the command wrote.
func runLogin(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"login"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = markerEnv(newMarker(), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errBuf := newLogBuffer() // written by the command while the test reads it
	cmd.Stderr = errBuf
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	require.True(t, lines.Scan(), "login printed no authorization URL; stderr:\n%s", errBuf.String())
	authURL := lines.Text()
	var rest strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
	}()

	jar, err := cookiejar.New(nil) // a provider may keep the interaction in cookies
	require.NoError(t, err)
	browser := &http.Client{Timeout: 30 * time.Second, Jar: jar}
	resp, err := browser.Get(authURL)
	require.NoError(t, err, "following the authorization URL")
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the login command's page: %s", page)
	assert.Contains(t, string(page), "You can close this window")

	<-done
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return authURL + "\n" + rest.String(), errBuf.String(), code
}

// statusProblems calls mcp_status and returns its problems.
func statusProblems(t *testing.T, c *client) []string {
	t.Helper()
	var st struct {
		Problems []string `json:"problems"`
	}
	text := firstText(t, c.callToolResult("mcp_status", map[string]any{}))
	require.NoError(t, json.Unmarshal([]byte(text), &st), "mcp_status: %s", text)
	return st.Problems
}

// TestOAuthUpstream walks through the life of a server that needs OAuth:
// not logged in (a problem naming the login command), `login --no-browser`
// against a real provider, the running aggregator taking the tokens up
// without a restart, calls across access token expiry and a revoked
// access token, and a revoked refresh token making it a problem again.
// No token ever shows in the aggregator's output, and the client's own
// token never reaches the upstream.
func TestOAuthUpstream(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "")
	up := startSecuredUpstream(t, as)
	home, env := loginHome(t)
	a, cfg := startSecuredAggregator(t, up, env)
	assert.True(t, a.log.containsLine("run `mcp-aggregator login secured`"), "the log names the login command:\n%s", a.log)
	c := a.newClient()
	wire, ok := c.wire.(*httpWire)
	require.True(t, ok)
	wire.hc.Transport = withAuthorization{base: wire.hc.Transport}
	c.initialize()
	listen(t, a, c)
	assert.ElementsMatch(t, []string{"mcp_release", "mcp_status"}, toolNames(t, c.listTools()))
	assert.True(t, anyContains(statusProblems(t, c), `server "secured"`, "not logged in", "mcp-aggregator login secured"),
		"mcp_status names the login command: %v", statusProblems(t, c))

	check := exec.Command(binary, "check", "--config", cfg)
	check.Env = markerEnv(newMarker(), env...)
	out, err := check.CombinedOutput()
	require.NoError(t, err, "check: %s", out)
	assert.Contains(t, string(out), "run `mcp-aggregator login secured`")
	tools := exec.Command(binary, "tools", "--config", cfg)
	tools.Env = markerEnv(newMarker(), env...)
	out, err = tools.CombinedOutput()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, "tools: %s", out)
	assert.Equal(t, 1, exitErr.ExitCode())
	assert.Contains(t, string(out), `server "secured": could not start: not logged in; run `+"`mcp-aggregator login secured`")

	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	require.Equal(t, 0, code, "login failed; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, strings.Split(strings.TrimSpace(stdout), "\n"), "logged in to secured")
	authURL := strings.SplitN(stdout, "\n", 2)[0]
	assert.Contains(t, authURL, "code_challenge_method=S256")

	dir := filepath.Join(home, ".config", "mcp-aggregator")
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "token directory mode")
	files, err := filepath.Glob(filepath.Join(dir, "oauth-*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one token file")
	st, err = os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "token file mode")

	// The running aggregator takes the login up: the server connects, its
	// tool appears, and the client is told.
	_, ok = c.waitNotification(func(n notification) bool { return n.Method == "notifications/tools/list_changed" }, startTimeout)
	require.True(t, ok, "no tools/list_changed after the login; stderr:\n%s", a.log)
	assert.Contains(t, toolNames(t, c.listTools()), "sec_whoami")
	assert.Equal(t, oauthSubject, firstText(t, c.callToolResult("sec_whoami", map[string]any{})))
	first := up.lastToken()
	require.NotEmpty(t, first)
	tools = exec.Command(binary, "tools", "--json", "--config", cfg)
	tools.Env = markerEnv(newMarker(), env...)
	out, err = tools.Output()
	require.NoError(t, err, "tools after the login: %s", out)
	assert.Contains(t, string(out), `"name": "sec_whoami"`, "tools uses the stored login too")

	// Past the access token's expiry, calls go on with a refreshed token.
	expiries := as.store.expiries()
	require.NotEmpty(t, expiries)
	time.Sleep(time.Until(expiries[len(expiries)-1]) + 100*time.Millisecond) // the instant the token expires, not a guess
	assert.Equal(t, oauthSubject, firstText(t, c.callToolResult("sec_whoami", map[string]any{})))
	second := up.lastToken()
	assert.NotEqual(t, first, second, "the call after expiry carries a new token")
	refreshes := as.store.notesOf("refresh_token")
	require.NotEmpty(t, refreshes, "the aggregator refreshed the token")
	for _, n := range refreshes {
		assert.True(t, strings.HasPrefix(n, up.url+" "), "every refresh names the resource (RFC 8707): %q", n)
	}
	for _, n := range append(as.store.notesOf("authorize"), as.store.notesOf("authorization_code")...) {
		assert.True(t, strings.HasPrefix(n, up.url+" "), "the authorization and the code exchange name the resource: %q", n)
	}

	// A token the server stops taking before it expires: one refresh on
	// the 401, and the call goes through.
	up.reject(second)
	assert.Equal(t, oauthSubject, firstText(t, c.callToolResult("sec_whoami", map[string]any{})))
	assert.NotEqual(t, second, up.lastToken())

	// The grant revoked at the provider: the next refresh is refused, and
	// the server is a problem that names the login command again.
	as.store.revokeRefreshTokens()
	up.reject(up.lastToken())
	failed := c.callTool("sec_whoami", map[string]any{})
	failure := string(failed.Error) + string(failed.Result)
	assert.Contains(t, failure, "mcp-aggregator login secured", "the failed call says how to fix it")
	assert.True(t, anyContains(statusProblems(t, c), `server "secured"`, "refused", "mcp-aggregator login secured"),
		"mcp_status names the login command again: %v", statusProblems(t, c))

	// A client that declared URL-mode elicitation is offered the login
	// instead: the call answers -32042 with the authorization URL, the user
	// finishes in the browser, and the same call then goes through.
	e := newElicitingClient(t, a, "form", "url")
	listen(t, a, e) // the stream notifications/elicitation/complete comes on
	_, el := loginOfferOf(t, e.callTool("sec_whoami", map[string]any{}), as.issuer)
	assert.Contains(t, el.Message, "secured")
	again := e.callTool("sec_whoami", map[string]any{})
	assert.Contains(t, string(again.Error), el.URL, "a second call while the login is under way offers the same URL")
	// The client is told the elicitation is complete (2025-11-25), and
	// retries by itself.
	approveLogin(t, a, e, el)
	_, ok = a.log.waitLine(func(line string) bool { return strings.Contains(line, "logged in through a client's browser") }, startTimeout, a.exited)
	require.True(t, ok, "the offered login did not complete:\n%s", a.log)
	assert.Equal(t, oauthSubject, firstText(t, e.callToolResult("sec_whoami", map[string]any{})))
	notes, _ := e.inbox.snapshot()
	completions := 0
	for _, n := range notes {
		if n.Method == "notifications/elicitation/complete" {
			completions++
		}
	}
	assert.Equal(t, 1, completions, "one completion, although the client was offered the login twice")
	assert.Empty(t, statusProblems(t, e), "the login clears the problem")

	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var stored struct {
		RefreshToken string `json:"refresh_token"`
	}
	require.NoError(t, json.Unmarshal(data, &stored))
	require.NotEmpty(t, stored.RefreshToken)

	// logout forgets the login; the running aggregator follows.
	const noticed = "a stored OAuth login changed"
	before := strings.Count(a.log.String(), noticed)
	logout := exec.Command(binary, "logout", "secured", "--config", cfg)
	logout.Env = markerEnv(newMarker(), env...)
	out, err = logout.CombinedOutput()
	require.NoError(t, err, "logout: %s", out)
	assert.Equal(t, "logged out of secured\n", string(out))
	_, err = os.Stat(files[0])
	assert.ErrorIs(t, err, os.ErrNotExist, "the token file is gone")
	_, ok = a.log.waitLine(func(string) bool { return strings.Count(a.log.String(), noticed) > before }, startTimeout, a.exited)
	require.True(t, ok, "the aggregator did not notice the logout:\n%s", a.log)
	failed = c.callTool("sec_whoami", map[string]any{})
	assert.Contains(t, string(failed.Error)+string(failed.Result), "not logged in; run `mcp-aggregator login secured`")

	// Tokens go to that server alone, and never into the output.
	for h := range up.headers() {
		assert.NotContains(t, h, downstreamToken, "the client's own token reached the upstream")
	}
	output := a.log.String()
	assert.NotContains(t, output, stored.RefreshToken, "the refresh token is in the aggregator's output")
	for h := range up.headers() {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && tok != "" {
			assert.NotContains(t, output, tok, "an access token is in the aggregator's output")
			assert.NotContains(t, stdout+stderr, tok, "an access token is in the login command's output")
		}
	}
}

// TestOAuthLoginRejectsAnotherIssuer: an authorization response whose iss
// names another issuer than the one the metadata came from (a mix-up
// attack, RFC 9207) ends the login with an error, and nothing is stored.
func TestOAuthLoginRejectsAnotherIssuer(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "https://attacker.example")
	up := startSecuredUpstream(t, as)
	home, env := loginHome(t)
	cfg := securedConfig(t, up.url)
	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	assert.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "issuer")
	assert.NotContains(t, stdout, "logged in to secured")
	files, err := filepath.Glob(filepath.Join(home, ".config", "mcp-aggregator", "oauth-*.json"))
	require.NoError(t, err)
	assert.Empty(t, files, "no token is stored")
	assert.Empty(t, as.store.notesOf("authorization_code"), "the code is never exchanged")
}

// loginHome is a fresh home directory for the login commands and the
// environment that names it, where their token files go.
func loginHome(t *testing.T) (string, []string) {
	home := t.TempDir()
	return home, []string{"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "HOME=" + home}
}

// startSecuredAggregator starts an aggregator, with env as its environment
// (loginHome's), whose one server "secured" is up, its tools prefixed sec_,
// and needs an OAuth login; it returns the aggregator, loaded, and its
// config file.
func startSecuredAggregator(t *testing.T, up *securedUpstream, env []string) (*aggregator, string) {
	t.Helper()
	cfg := writeConfig(t, fmt.Sprintf(`version: 1
servers:
  secured:
    truely-stateless: true
    url: %s
    auth: {type: oauth}
    transform: [{prefix: sec_}]
`, up.url))
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{cfg}, env: env})
	a.waitLoaded()
	return a, cfg
}

// loginOffer is a URL-mode elicitation offering a login.
type loginOffer struct {
	Mode, ElicitationID, URL, Message string
}

// loginOfferOf is what offer, the answer to a call that needs a login, says:
// the message of its error, URLElicitationRequiredError (-32042), and the
// one URL-mode elicitation it carries, whose URL is issuer's authorization
// endpoint.
func loginOfferOf(t *testing.T, offer *response, issuer string) (message string, el loginOffer) {
	t.Helper()
	require.NotEmpty(t, offer.Error, "a call that needs a login fails: %s", offer.Result)
	var rpcErr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Elicitations []loginOffer `json:"elicitations"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(offer.Error, &rpcErr), "%s", offer.Error)
	assert.Equal(t, -32042, rpcErr.Code, "URLElicitationRequiredError: %s", offer.Error)
	require.Len(t, rpcErr.Data.Elicitations, 1, "%s", offer.Error)
	el = rpcErr.Data.Elicitations[0]
	assert.Equal(t, "url", el.Mode)
	assert.NotEmpty(t, el.ElicitationID)
	require.True(t, strings.HasPrefix(el.URL, issuer+"/authorize?"), "the authorization URL: %s", el.URL)
	return rpcErr.Message, el
}

// approveLogin opens el's URL as the person's browser would, which the test
// authorization server approves at once, and waits for e, the client it
// was offered to, to be told the elicitation is complete.
func approveLogin(t *testing.T, a *aggregator, e *client, el loginOffer) {
	t.Helper()
	resp, err := http.Get(el.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	complete, ok := e.waitNotification(func(n notification) bool { return n.Method == "notifications/elicitation/complete" }, startTimeout)
	require.True(t, ok, "no notifications/elicitation/complete after the login; stderr:\n%s", a.log)
	assert.JSONEq(t, fmt.Sprintf(`{"elicitationId":%q}`, el.ElicitationID), string(complete.Params))
}

// startAwaitingLogin starts an authorization server and an aggregator
// (startSecuredAggregator) whose server "secured" waits for a login to it,
// from a fresh login home.
func startAwaitingLogin(t *testing.T) (*authServer, *aggregator) {
	t.Helper()
	as := startAuthServer(t, true, "")
	_, env := loginHome(t)
	a, _ := startSecuredAggregator(t, startSecuredUpstream(t, as), env)
	return as, a
}

// newElicitingClient opens a 2025-11-25 session, with the downstream
// token, whose client declares the elicitation modes given ("form", "url").
func newElicitingClient(t *testing.T, a *aggregator, modes ...string) *client {
	t.Helper()
	c := a.newClient()
	c.wire.(*httpWire).hc.Transport = withAuthorization{base: c.wire.(*httpWire).hc.Transport}
	elicitation := map[string]any{}
	for _, m := range modes {
		elicitation[m] = map[string]any{}
	}
	init := c.mustRequest("initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    map[string]any{"elicitation": elicitation},
		"clientInfo":      map[string]any{"name": "elicitation-client", "version": "1.0.0"},
	})
	require.Empty(t, init.Error)
	c.wire.negotiated(protocolVersion)
	require.NoError(t, c.notify("notifications/initialized", nil))
	return c
}

// mustLogin runs `login --no-browser` for the server "secured" of the config
// file cfg, with env, and requires it to succeed.
func mustLogin(t *testing.T, env []string, cfg string) {
	t.Helper()
	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	require.Equal(t, 0, code, "login; stdout:\n%s\nstderr:\n%s", stdout, stderr)
}

// securedConfig writes a config with one server, secured, at url, which
// needs an OAuth login.
func securedConfig(t *testing.T, url string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  secured:\n    url: %s\n    auth: {type: oauth}\n", url))
}

// loggedInSecured starts a securedUpstream of as and logs in to it
// (mustLogin) from a fresh login home; it returns the upstream, the home,
// the environment that names it and the config file (securedConfig).
func loggedInSecured(t *testing.T, as *authServer) (up *securedUpstream, home string, env []string, cfg string) {
	t.Helper()
	up = startSecuredUpstream(t, as)
	home, env = loginHome(t)
	cfg = securedConfig(t, up.url)
	mustLogin(t, env, cfg)
	return up, home, env, cfg
}

// storedGrant is what a token file holds, as far as the tests look.
type storedGrant struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Resource     string `json:"resource"`
}

// readGrants reads the token files under home.
func readGrants(t *testing.T, home string) map[string]storedGrant {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(home, ".config", "mcp-aggregator", "oauth-*.json"))
	require.NoError(t, err)
	out := map[string]storedGrant{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var g storedGrant
		require.NoError(t, json.Unmarshal(data, &g), "%s", f)
		out[f] = g
	}
	return out
}

// onlyGrant is the one token file under home.
func onlyGrant(t *testing.T, home string) storedGrant {
	t.Helper()
	grants := readGrants(t, home)
	require.Len(t, grants, 1, "one token file")
	for _, g := range grants {
		return g
	}
	return storedGrant{}
}

// refreshAt uses a refresh token at the provider's token endpoint, as a
// client would, and returns the HTTP status and the OAuth error code.
func refreshAt(t *testing.T, as *authServer, clientID, refreshToken string) (int, string) {
	t.Helper()
	resp, err := http.PostForm(as.issuer+"/oauth/token", url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "client_id": {clientID},
	})
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	return resp.StatusCode, body.Error
}

// runCommand runs the binary with env and returns its combined output and
// exit code.
func runCommand(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = markerEnv(newMarker(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out.String(), exitErr.ExitCode()
	}
	require.NoError(t, err, "%v: %s", args, out.String())
	return out.String(), 0
}

// TestOAuthLogoutRevokes: logout revokes the refresh token, then the
// access token, at the provider (RFC 7009), so that the refresh token no
// longer works there; a revocation that fails still removes the local
// copy and says so, without the token.
func TestOAuthLogoutRevokes(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "")
	_, home, env, cfg := loggedInSecured(t, as)
	g := onlyGrant(t, home)
	require.NotEmpty(t, g.RefreshToken)
	require.True(t, as.store.hasRefresh(g.RefreshToken), "the provider takes the refresh token before the logout")

	cmd := exec.Command(binary, "logout", "secured", "--config", cfg)
	cmd.Env = markerEnv(newMarker(), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "logout: %s%s", out.String(), errOut.String())
	assert.Equal(t, "logged out of secured\n", out.String())
	assert.Empty(t, errOut.String())
	assert.Empty(t, readGrants(t, home), "the token file is gone")
	assert.Equal(t, []string{"refresh_token ", "access_token "}, as.store.notesOf("revoke"), "the refresh token is revoked first, then the access token")
	status, oauthErr := refreshAt(t, as, g.ClientID, g.RefreshToken)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "invalid_grant", oauthErr, "the refresh token no longer works after logout")

	// The provider cannot revoke: the local copy goes all the same.
	mustLogin(t, env, cfg)
	g = onlyGrant(t, home)
	as.failRevoke.Store(true)
	text, code := runCommand(t, env, "logout", "secured", "--config", cfg)
	assert.Equal(t, 0, code, "%s", text)
	assert.Contains(t, text, "logout: could not revoke the tokens at the authorization server "+as.issuer+" (revoking the refresh token: the revocation endpoint answered HTTP 503)")
	assert.Contains(t, text, "logged out of secured\n")
	assert.NotContains(t, text, g.RefreshToken)
	assert.NotContains(t, text, g.AccessToken)
	assert.Empty(t, readGrants(t, home), "the token file is gone although the revocation failed")
	assert.True(t, as.store.hasRefresh(g.RefreshToken), "the provider kept it, as it said")

	text, code = runCommand(t, env, "logout", "secured", "--config", cfg)
	assert.Equal(t, 0, code)
	assert.Equal(t, "no stored login for secured\n", text)
}

// TestOAuthServerMovesIssuer: tokens are kept per server URL and issuer. A
// server whose metadata names another authorization server than the one
// its stored login came from is sent none of the old tokens, and the old
// issuer is not asked to refresh them; the server needs a login, and that
// login, with the new issuer, leaves the old one's file alone.
func TestOAuthServerMovesIssuer(t *testing.T) {
	t.Parallel()
	first := startAuthServer(t, true, "")
	second := startAuthServer(t, true, "")
	up, home, env, cfg := loggedInSecured(t, first)
	require.Len(t, readGrants(t, home), 1)
	text, code := runCommand(t, env, "tools", "--json", "--config", cfg)
	require.Equal(t, 0, code, "%s", text)
	assert.Contains(t, text, `"name": "whoami"`)

	// The first issuer's login as the move finds it: the call above may have
	// refreshed it (the access token lives 5s and is refreshed in its last
	// second, which a slow start reaches), as it should while the server
	// is still the first issuer's.
	before := readGrants(t, home)
	require.Len(t, before, 1)
	refreshes := len(first.store.notesOf("refresh_token"))
	up.moveTo(second)
	mark := up.sent()
	text, code = runCommand(t, env, "tools", "--config", cfg)
	assert.Equal(t, 1, code, "%s", text)
	assert.Contains(t, text, "not logged in with its authorization server "+second.issuer+" (the stored login is for "+first.issuer+"); run `mcp-aggregator login secured`")
	up.mu.Lock()
	for _, h := range up.seen[mark:] {
		assert.Empty(t, h, "the first issuer's token was sent to the server that left it")
	}
	up.mu.Unlock()

	mustLogin(t, env, cfg) // with the new issuer
	assert.NotEmpty(t, second.store.notesOf("authorization_code"), "the login went to the new issuer")
	after := readGrants(t, home)
	require.Len(t, after, 2, "one file per issuer")
	for f, g := range before {
		assert.Equal(t, g, after[f], "the first issuer's login is left alone")
	}
	text, code = runCommand(t, env, "tools", "--json", "--config", cfg)
	require.Equal(t, 0, code, "%s", text)
	assert.Contains(t, text, `"name": "whoami"`)
	assert.Len(t, first.store.notesOf("refresh_token"), refreshes, "the first issuer was not asked to refresh after the move")

	text, code = runCommand(t, env, "logout", "secured", "--config", cfg)
	assert.Equal(t, 0, code, "%s", text)
	assert.Empty(t, readGrants(t, home), "logout removes the logins of every issuer")
	assert.Len(t, first.store.notesOf("revoke"), 2, "each issuer revokes its own")
	assert.Len(t, second.store.notesOf("revoke"), 2)
}

// TestOAuthPreregisteredClient: with auth.client_id and auth.client_secret,
// no client is registered; the login, the refresh and the revocation all
// authenticate as that client, and its secret shows in no output.
func TestOAuthPreregisteredClient(t *testing.T) {
	t.Parallel()
	const clientID, secret = "aggregator-preregistered", "pre-registered-secret-value-42"
	as := startAuthServer(t, true, "")
	as.store.addConfidentialClient(clientID, secret)
	up := startSecuredUpstream(t, as)
	home, env := loginHome(t)
	env = append(env, "SECURED_CLIENT_SECRET="+secret)
	cfg := writeConfig(t, fmt.Sprintf(`version: 1
servers:
  secured:
    url: %s
    auth:
      type: oauth
      client_id: %s
      client_secret: {env: SECURED_CLIENT_SECRET}
`, up.url, clientID))

	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	require.Equal(t, 0, code, "login; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Empty(t, as.store.notesOf("register"), "a pre-registered client registers nothing")
	authURL := strings.SplitN(stdout, "\n", 2)[0]
	u, err := url.Parse(authURL)
	require.NoError(t, err)
	assert.Equal(t, clientID, u.Query().Get("client_id"))
	g := onlyGrant(t, home)
	assert.Equal(t, clientID, g.ClientID)

	// The server stops taking the access token: the refresh authenticates
	// with the secret, and the call goes through. A run that takes longer
	// than the access token lives refreshes again, rightly: what is
	// promised is at least one refresh, each with the refresh token the
	// one before it (or the login) issued, and no login asked again.
	up.reject(g.AccessToken)
	text, code := runCommand(t, env, "tools", "--json", "--config", cfg)
	require.Equal(t, 0, code, "%s", text)
	assert.Contains(t, text, `"name": "whoami"`)
	assert.NotContains(t, text, "mcp-aggregator login", "no new login is asked for")
	assert.NotEqual(t, g.AccessToken, up.lastToken())
	issued, spent := as.store.refreshHistory()
	require.NotEmpty(t, spent, "at least one refresh")
	require.Len(t, issued, len(spent)+1, "each refresh rotated the refresh token")
	assert.Equal(t, g.RefreshToken, issued[0], "the login's refresh token comes first")
	assert.Equal(t, issued[:len(spent)], spent, "each refresh spent the latest refresh token")
	assert.Len(t, as.store.notesOf("refresh_token"), len(spent), "every refresh was accepted, with the client's secret")

	rotated := onlyGrant(t, home)
	assert.Equal(t, issued[len(issued)-1], rotated.RefreshToken, "the latest refresh token is stored")
	require.True(t, as.store.hasRefresh(rotated.RefreshToken))
	text, code = runCommand(t, env, "logout", "secured", "--config", cfg)
	assert.Equal(t, 0, code, "%s", text)
	assert.Equal(t, "logged out of secured\n", text, "the revocation, authenticated as the client, went through")
	assert.False(t, as.store.hasRefresh(rotated.RefreshToken), "the rotated refresh token is revoked")
	assert.Empty(t, readGrants(t, home))
	for _, out := range []string{stdout, stderr, text} {
		assert.NotContains(t, out, secret)
	}
}
