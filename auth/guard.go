package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// Options configure a Guard. Tokens and OAuth may be set together: a
// request passes with a static token or with a valid access token.
type Options struct {
	// Tokens maps each client's name to its static bearer token.
	Tokens map[string]string
	// OAuth, when set, accepts JWT access tokens of one issuer.
	OAuth *OAuth
	// Logger receives fetch failures and refusals (never a token); nil
	// discards them.
	Logger *slog.Logger
	// HTTPClient fetches the issuer's metadata and keys; nil uses a client
	// with a 10s timeout that follows no redirect away from https.
	HTTPClient *http.Client
	// MinRefetch is the least time between two fetches of the issuer's keys
	// caused by tokens naming an unknown key (default 1m).
	MinRefetch time.Duration
	// MaxKeyAge is how long fetched keys are used before they are fetched
	// again (default 1h).
	MaxKeyAge time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat (default 30s).
	Leeway time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// OAuth names the authorization server whose access tokens are accepted.
type OAuth struct {
	Issuer         string
	Audience       string   // a token's aud must contain it
	RequiredScopes []string // each one must be granted
}

// Guard authenticates requests to the gateway. It is safe for concurrent
// use and immutable but for its cache of the issuer's keys and its count
// of refusals.
type Guard struct {
	opts Options
	// refused logs refusals, throttled; shared with the Guards built
	// from this one.
	refused *refusals
	static  *staticTokens
	oauth   *oauthVerifier
}

// New returns a Guard for opts.
func New(opts Options) *Guard { return NewFrom(nil, opts) }

// NewFrom returns a Guard for opts that keeps prev's verifier of access
// tokens, with the issuer's keys it fetched, when the OAuth settings did
// not change: editing the static tokens must not make every OAuth client
// wait for a fetch, nor fail while the issuer is unreachable.
func NewFrom(prev *Guard, opts Options) *Guard {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = defaultClient()
	}
	if opts.MinRefetch <= 0 {
		opts.MinRefetch = time.Minute
	}
	if opts.MaxKeyAge <= 0 {
		opts.MaxKeyAge = time.Hour
	}
	if opts.Leeway <= 0 {
		opts.Leeway = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Guard{opts: opts, static: newStaticTokens(opts.Tokens)}
	if prev != nil {
		g.refused = prev.refused
	} else {
		g.refused = newRefusals(opts.Logger)
	}
	if prev != nil && prev.oauth != nil && sameOAuth(prev.opts.OAuth, opts.OAuth) {
		g.oauth = prev.oauth
		return g
	}
	if o := opts.OAuth; o != nil {
		g.oauth = &oauthVerifier{issuer: o.Issuer, audience: o.Audience, scopes: o.RequiredScopes, leeway: opts.Leeway, now: opts.Now,
			keys: &keySource{issuer: o.Issuer, client: opts.HTTPClient, log: opts.Logger, now: opts.Now,
				minRefetch: opts.MinRefetch, maxAge: opts.MaxKeyAge}}
	}
	return g
}

// Same reports whether g was built from the same tokens and OAuth settings
// as opts, so that a reload can keep it (and its fetched keys).
func (g *Guard) Same(opts Options) bool {
	if g == nil {
		return false
	}
	return maps.Equal(g.opts.Tokens, opts.Tokens) && sameOAuth(g.opts.OAuth, opts.OAuth)
}

// sameOAuth reports whether two OAuth settings accept the same tokens.
func sameOAuth(a, b *OAuth) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Issuer == b.Issuer && a.Audience == b.Audience && slices.Equal(a.RequiredScopes, b.RequiredScopes)
}

// Prefetch fetches the issuer's keys now, so that a misconfigured issuer
// shows in the log at start rather than at the first request.
func (g *Guard) Prefetch(ctx context.Context) {
	if g.oauth == nil {
		return
	}
	ks := g.oauth.keys
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.cache.Load() == nil {
		ks.refresh(ctx, nil)
	}
}

// Tokens are the static tokens g accepts, by client (read-only).
func (g *Guard) Tokens() map[string]string {
	if g == nil {
		return nil
	}
	return g.opts.Tokens
}

// KeyFetches counts the fetches of the issuer's keys so far.
func (g *Guard) KeyFetches() int64 {
	if g.oauth == nil {
		return 0
	}
	return g.oauth.keys.fetches.Load()
}

// Failure is a refusal: the status (401 or 403; 503 while the issuer's
// keys cannot be fetched), the WWW-Authenticate challenge, and a message
// for the response body.
type Failure struct {
	Status     int
	Challenge  string // "" when the refusal is not about credentials
	Message    string
	RetryAfter int // seconds; 0 for none
}

// Authenticate returns who r comes from, or why it is refused: a static
// token's client, or the subject of an OAuth access token with its client,
// its claims and the token itself (an identity.Secret, which never prints),
// for the upstreams that take each caller's own credentials.
func (g *Guard) Authenticate(r *http.Request) (identity.Caller, *Failure) {
	token, ok, malformed := bearerToken(r.Header)
	if !ok {
		if malformed {
			return identity.Caller{}, g.refuse(r, http.StatusBadRequest, "invalid_request",
				"the Authorization header must be one \"Bearer <token>\"")
		}
		return identity.Caller{}, g.refuse(r, http.StatusUnauthorized, "", "authentication required: send Authorization: Bearer <token>")
	}
	if client, ok := g.static.lookup(token); ok {
		return identity.ClientCaller(client), nil
	}
	if g.oauth == nil || strings.Count(token, ".") != 2 {
		g.refused.note(slog.LevelInfo, "refused a request with an unknown bearer token", "remote", r.RemoteAddr, "path", r.URL.Path)
		return identity.Caller{}, g.refuse(r, http.StatusUnauthorized, "invalid_token", "the bearer token is not valid")
	}
	who, err := g.oauth.verify(r.Context(), token)
	if err == nil && g.static.has(who.Client) {
		// The name of a static token's client: profiles and operators are
		// chosen by client name, so taking it would act as that client.
		// (A subject of the same name is fine: principals of different
		// kinds never mix.)
		g.refused.note(slog.LevelWarn, "refused an access token that names a client of http.auth.tokens", "client", who.Client, "remote", r.RemoteAddr,
			"fix", "give the static token's client another name, or stop the issuer from issuing tokens with that client_id or azp")
		return identity.Caller{}, g.refuse(r, http.StatusUnauthorized, "invalid_token",
			fmt.Sprintf("the token names client %q, which authenticates with a static token here", who.Client))
	}
	if err == nil {
		who.Token = identity.NewSecret(token)
		return who, nil
	}
	if err.unavailable {
		g.refused.note(slog.LevelWarn, "refused a request: the OAuth issuer's keys are not available", "remote", r.RemoteAddr, "err", err.cause)
		return identity.Caller{}, &Failure{Status: http.StatusServiceUnavailable, Challenge: "", Message: err.description, RetryAfter: 10}
	}
	if err.insufficientScope {
		g.refused.note(slog.LevelInfo, "refused a request: insufficient scope", "principal", who.Principal, "client", who.Client, "remote", r.RemoteAddr, "reason", err.description)
		return identity.Caller{}, g.refuse(r, http.StatusForbidden, "insufficient_scope", err.description)
	}
	g.refused.note(slog.LevelInfo, "refused a request: invalid access token", "remote", r.RemoteAddr, "reason", err.description)
	return identity.Caller{}, g.refuse(r, http.StatusUnauthorized, "invalid_token", err.description)
}

// refuse builds a refusal and its challenge (RFC 6750 §3, RFC 9728 §5.1).
// A request that carried no credentials gets no error code.
func (g *Guard) refuse(r *http.Request, status int, code, description string) *Failure {
	params := []string{}
	if g.oauth != nil {
		params = append(params, param("resource_metadata", g.MetadataURL(r)))
	}
	if code != "" {
		params = append(params, param("error", code), param("error_description", description))
	}
	if g.oauth != nil && len(g.oauth.scopes) > 0 { // what to ask for, also after a bad token (MCP authorization)
		params = append(params, param("scope", strings.Join(g.oauth.scopes, " ")))
	}
	challenge := "Bearer"
	if len(params) > 0 {
		challenge += " " + strings.Join(params, ", ")
	}
	return &Failure{Status: status, Challenge: challenge, Message: description}
}

// param renders one auth-param with a quoted-string value; characters a
// quoted-string cannot carry are dropped.
func param(name, value string) string {
	clean := strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, value)
	return name + `="` + clean + `"`
}

// WellKnownPath is where the RFC 9728 protected resource metadata is served.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// OAuthEnabled reports whether g accepts OAuth access tokens (and so has
// protected resource metadata to publish).
func (g *Guard) OAuthEnabled() bool { return g != nil && g.oauth != nil }

// MetadataURL is the address of the protected resource metadata. Its
// origin is the audience's when the audience is an http(s) URL (the
// resource's public name, right behind a proxy that terminates TLS), else
// the origin the request addressed.
// A request to a view, /mcp/<name>, is pointed at the view's own document
// (RFC 9728 §3.1: the well-known path before the resource's path).
func (g *Guard) MetadataURL(r *http.Request) string {
	if name, ok := strings.CutPrefix(r.URL.Path, "/mcp/"); ok && ViewName(name) {
		return g.origin(r) + WellKnownPath + "/mcp/" + name
	}
	return g.origin(r) + WellKnownPath
}

// ViewName reports whether name may name a view (/mcp/<name>): 1 to 64
// letters, digits, '.', '_' or '-', the names config allows.
func ViewName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (g *Guard) origin(r *http.Request) string {
	if g.oauth != nil {
		if u, err := url.Parse(g.oauth.audience); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Metadata is the RFC 9728 protected resource metadata document; ok is
// false when OAuth is not configured.
func (g *Guard) Metadata() (doc []byte, ok bool) {
	if g == nil || g.oauth == nil {
		return nil, false
	}
	m := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ResourceName           string   `json:"resource_name"`
	}{
		Resource:               g.oauth.audience,
		AuthorizationServers:   []string{g.oauth.issuer},
		ScopesSupported:        g.oauth.scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcp-aggregator",
	}
	doc, _ = json.Marshal(m)
	return doc, true
}

// Write answers the request with the refusal: the challenge, and a
// JSON-RPC error body that MCP clients can show.
func (f *Failure) Write(w http.ResponseWriter) {
	if f.Challenge != "" {
		w.Header().Set("WWW-Authenticate", f.Challenge)
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32001, "message": f.Message}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(f.Status)
	_, _ = w.Write(body)
}
