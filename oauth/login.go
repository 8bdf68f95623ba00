package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

// The flow: protected resource metadata from the 401's WWW-Authenticate
// or the well-known URLs, authorization server metadata with path
// insertion (discovery.go), a pre-registered client or dynamic client
// registration (register.go), scope selection, PKCE S256, the RFC 8707
// resource parameter, the RFC 9207 iss check, and the code exchange with
// golang.org/x/oauth2; around it what a command-line login needs: the
// loopback redirect listener, the first unauthorized request, and turning
// the result into a stored Grant. The client is, in this order, the
// pre-registered one of the server's config, the client ID metadata
// document of the config (clientmeta.go) where the authorization server
// accepts one, or one registered now.

// DefaultLoginTimeout bounds the wait for the browser.
const DefaultLoginTimeout = 5 * time.Minute

// LoginOptions say which server to log in to and how.
type LoginOptions struct {
	Server *config.Server // a remote server with auth: {type: oauth}
	// Authorize is given the authorization URL: print it, open a browser.
	Authorize func(authURL string)
	// Timeout bounds the wait for the browser; 0: DefaultLoginTimeout.
	Timeout time.Duration
	// HTTPClient makes every request of the flow; nil: a client with a
	// 30s timeout per request.
	HTTPClient *http.Client
	// ClientName is the name registered by dynamic client registration;
	// "": the server's auth.ClientName, else config.DefaultClientName.
	ClientName string
	// Redirects, when set, is where the browser comes back (a gateway's
	// own callback) instead of a listener on a loopback port.
	Redirects *Redirects
}

// redirectTarget is where the browser comes back to with the
// authorization response: a loopback listener of its own (callback), or a
// gateway's shared endpoint (Redirects).
type redirectTarget interface {
	redirectURI() string
	expect(state string)
	wait(ctx context.Context) (redirect, error)
	close()
}

// Login runs the authorization code flow for opts.Server and returns the
// grant obtained; the caller stores it.
func Login(ctx context.Context, opts LoginOptions) (*Grant, error) {
	srv := opts.Server
	if srv.Auth.Type != config.ServerAuthOAuth {
		return nil, fmt.Errorf("server %q has no auth: {type: oauth} in its config; add it, or the server needs no login", srv.ID)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultLoginTimeout
	}
	var cb redirectTarget
	if opts.Redirects != nil {
		cb = opts.Redirects.begin()
	} else {
		listener, err := listenCallback()
		if err != nil {
			return nil, err
		}
		cb = listener
	}
	defer cb.close()

	challenges, err := probe(ctx, client, srv)
	if err != nil {
		return nil, err
	}
	// The flow's POSTs carry a client secret, a code and its verifier in
	// their bodies: a 307 or 308 to another origin is not followed.
	client = sameorigin.Client(client, sameorigin.Policy{NoBody: true})
	target, err := discover(ctx, client, srv, challenges)
	if err != nil {
		return nil, fmt.Errorf("server %q: login failed: %w", srv.ID, err)
	}
	cfg, err := clientConfig(ctx, client, opts, target, cb.redirectURI())
	if err != nil {
		return nil, fmt.Errorf("server %q: login failed: %w", srv.ID, err)
	}
	code, verifier, err := authorize(ctx, opts, timeout, cb, cfg, target)
	if err != nil {
		return nil, fmt.Errorf("server %q: login failed: %w", srv.ID, err)
	}
	token, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, client), code,
		oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", target.resource))
	if err != nil {
		return nil, fmt.Errorf("server %q: login failed: %w", srv.ID, exchangeErr(err))
	}
	if token.AccessToken == "" {
		return nil, fmt.Errorf("server %q: login failed: the authorization server issued no access token", srv.ID)
	}
	return grantOf(srv, target, cfg, token), nil
}

// loginTarget is what discovery found for a login.
type loginTarget struct {
	resource string          // the resource indicator sent (RFC 8707)
	issuer   string          // the issuer the resource metadata names; "" when none was found
	meta     *serverMetadata // the authorization server's; never nil
	scopes   []string        // the scopes the server asks for
}

// discover finds the authorization server of srv and what to ask it for.
// A server that publishes no resource metadata is taken to be its own
// authorization server, and one that publishes no metadata to have the
// default endpoints, as in the first MCP authorization spec.
func discover(ctx context.Context, client *http.Client, srv *config.Server, challenges []challenge) (*loginTarget, error) {
	resource, err := resourceURI(srv.URL)
	if err != nil {
		return nil, err
	}
	prm, err := findResourceMetadata(ctx, client, srv.URL, challenges)
	if err != nil {
		return nil, err
	}
	t := &loginTarget{resource: resource.String()}
	issuer := (&url.URL{Scheme: resource.Scheme, Host: resource.Host}).String()
	if prm != nil {
		issuer, t.issuer, t.resource, t.scopes = prm.AuthorizationServers[0], prm.AuthorizationServers[0], prm.Resource, prm.ScopesSupported
	}
	if scope := bearerParam(challenges, "scope"); scope != "" {
		t.scopes = strings.Fields(scope)
	}
	t.meta, err = getServerMetadata(ctx, client, issuer)
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata: %w", err)
	}
	if t.meta == nil {
		base := strings.TrimSuffix(issuer, "/")
		t.meta = &serverMetadata{Issuer: issuer, AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token", RegistrationEndpoint: base + "/register"}
	} else if t.issuer != "" {
		t.issuer = t.meta.Issuer
	}
	return t, nil
}

// clientConfig is the OAuth client of the login, in the order the MCP
// authorization spec gives: the pre-registered one of the server's config;
// the client ID metadata document URL of the config, where the
// authorization server says it accepts one; one registered now; with the
// scopes to ask for.
func clientConfig(ctx context.Context, client *http.Client, opts LoginOptions, t *loginTarget, redirectURI string) (*oauth2.Config, error) {
	srv := opts.Server
	cfg := &oauth2.Config{RedirectURL: redirectURI, Endpoint: oauth2.Endpoint{AuthURL: t.meta.AuthorizationEndpoint, TokenURL: t.meta.TokenEndpoint}}
	name := opts.ClientName
	if name == "" {
		name = srv.Auth.ClientName
	}
	if name == "" {
		name = config.DefaultClientName
	}
	switch {
	case srv.Auth.ClientID != "":
		cfg.ClientID, cfg.ClientSecret = srv.Auth.ClientID, srv.Auth.ClientSecret
		switch methods := t.meta.TokenEndpointAuthMethodsSupported; {
		case contains(methods, "client_secret_post"):
			cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
		case contains(methods, "client_secret_basic"):
			cfg.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
		}
	case t.meta.ClientIDMetadataDocumentSupported && srv.Auth.ClientIDURL != "":
		// A public client: the document says token_endpoint_auth_method none.
		cfg.ClientID, cfg.Endpoint.AuthStyle = srv.Auth.ClientIDURL, oauth2.AuthStyleInParams
	case t.meta.RegistrationEndpoint != "":
		reg, err := registerClient(ctx, client, t.meta.RegistrationEndpoint, redirectURI, name)
		if err != nil {
			return nil, err
		}
		cfg.ClientID, cfg.ClientSecret, cfg.Endpoint.AuthStyle = reg.ClientID, reg.ClientSecret, reg.authStyle()
	case t.meta.ClientIDMetadataDocumentSupported:
		return nil, errors.New("the authorization server takes client ID metadata documents and offers no dynamic client registration; " +
			"set oauth.client_id_url in the config to a public https URL where the gateway (serve --http) or a web server serves the aggregator's document " +
			"(see docs/oauth.md), or register a client with it and set auth.client_id (and auth.client_secret) in the server's config")
	default:
		return nil, errors.New("the authorization server offers no dynamic client registration and takes no client ID metadata documents; register a client with it and set auth.client_id (and auth.client_secret) in the server's config")
	}
	cfg.Scopes = t.scopes
	if len(srv.Auth.Scopes) > 0 {
		cfg.Scopes = append([]string(nil), srv.Auth.Scopes...)
	}
	if contains(t.meta.ScopesSupported, "offline_access") && !contains(cfg.Scopes, "offline_access") {
		cfg.Scopes = append(cfg.Scopes, "offline_access") // ask for a refresh token
	}
	return cfg, nil
}

// authorize hands the authorization URL (PKCE S256, a fresh state, the
// resource) to opts.Authorize and waits for the browser to come back with
// a code, which it returns with the PKCE verifier.
func authorize(ctx context.Context, opts LoginOptions, timeout time.Duration, cb redirectTarget, cfg *oauth2.Config, t *loginTarget) (code, verifier string, err error) {
	verifier = oauth2.GenerateVerifier()
	state := rand.Text()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", t.resource))
	u, err := url.Parse(authURL)
	if err != nil {
		return "", "", errors.New("the authorization endpoint is not a URL")
	}
	if err := webURL(u); err != nil {
		// It is opened in a browser or handed to a client to open:
		// another scheme could launch a local program.
		return "", "", fmt.Errorf("the authorization server's authorization_endpoint %w; only https (or http on loopback) is opened", err)
	}
	cb.expect(state)
	if opts.Authorize != nil {
		opts.Authorize(authURL)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := cb.wait(wctx)
	if err != nil {
		if cimd := opts.Server.Auth.ClientIDURL; cimd != "" && cfg.ClientID == cimd && ctx.Err() == nil {
			// An authorization server that cannot use the document says so
			// in the browser, not to the redirect URI it cannot trust.
			return "", "", fmt.Errorf("%w; if the authorization server's page named a problem with the client, check that %s serves the client ID metadata document to it (mcp-aggregator serve --http serves it at that path)", err, safeText(cimd))
		}
		return "", "", err
	}
	if r.state != state {
		return "", "", errors.New("the authorization response is for another request (state)")
	}
	// Before anything of the answer is used, an error included: one from
	// another issuer is not acted on or shown (RFC 9207 §2.4).
	if err := checkIss(r.iss, t.meta); err != nil {
		return "", "", err
	}
	if r.err != "" {
		if cimd := opts.Server.Auth.ClientIDURL; cimd != "" && cfg.ClientID == cimd && (r.err == "invalid_client" || r.err == "invalid_request" || r.err == "unauthorized_client") {
			return "", "", fmt.Errorf("the authorization server answered %s instead of a code to the client ID metadata document %s; check that it is served there, over https, "+
				"to the authorization server (mcp-aggregator serve --http serves it at that path), and run login again", safeCode(r.err), safeText(cfg.ClientID))
		}
		return "", "", fmt.Errorf("the authorization server answered %s instead of a code; run login again and approve the request", safeCode(r.err))
	}
	return r.code, verifier, nil
}

// checkIss is RFC 9207's defence against mix-up: the iss of the
// authorization response, required when the server says it sends one,
// must name the server the request went to.
func checkIss(iss string, meta *serverMetadata) error {
	switch {
	case iss == "" && meta.IssParameterSupported:
		return fmt.Errorf("the authorization server %s says it names itself in its answers (RFC 9207 iss) but its answer named no issuer", safeText(meta.Issuer))
	case iss != "" && iss != meta.Issuer:
		return fmt.Errorf("the authorization response comes from the issuer %q, not %q, the one the request went to", safeText(iss), safeText(meta.Issuer))
	}
	return nil
}

// exchangeErr is the code exchange's failure without what the token
// endpoint's body or URL held but its error code.
func exchangeErr(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		if re.ErrorCode != "" {
			return fmt.Errorf("the token endpoint answered HTTP %d with error %s to the code exchange", status, safeCode(re.ErrorCode))
		}
		return fmt.Errorf("the token endpoint answered HTTP %d to the code exchange", status)
	}
	return fmt.Errorf("the code exchange: %w", plainErr(err))
}

// webURL accepts an https URL, or an http one to a loopback host.
func webURL(u *url.URL) error {
	scheme := strings.ToLower(u.Scheme)
	host := u.Hostname()
	loopback := strings.EqualFold(host, "localhost")
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		loopback = true
	}
	switch {
	case u.Host == "":
		return errors.New("has no host")
	case scheme == "https", scheme == "http" && loopback:
		return nil
	}
	return fmt.Errorf("uses the scheme %q", safeCode(u.Scheme))
}

// probe sends the request an unauthorized client would (an initialize) and
// returns the challenges of the server's 401, which name the protected
// resource metadata. A server that does not answer 401 still gets the
// flow, from the well-known URLs. The server's configured headers go to
// its origin alone: a redirect elsewhere is followed without them.
func probe(ctx context.Context, client *http.Client, srv *config.Server) ([]challenge, error) {
	client = sameorigin.Client(client, sameorigin.Policy{Headers: sameorigin.HeaderNames(srv.Headers)})
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-aggregator-login","version":"0"}}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("server %q: url: %w", srv.ID, err)
	}
	for k, v := range srv.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("server %q: cannot reach it: %w", srv.ID, plainErr(err)) // the URL may hold secrets
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return nil, nil
	}
	return parseChallenges(resp.Header.Values("WWW-Authenticate")), nil
}

// grantOf turns the flow's result into a Grant.
func grantOf(srv *config.Server, t *loginTarget, c *oauth2.Config, tok *oauth2.Token) *Grant {
	g := &Grant{
		Server: srv.URL, TokenURL: c.Endpoint.TokenURL, ClientID: c.ClientID, ClientSecret: c.ClientSecret,
		AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry,
		Obtained: time.Now(), Scopes: c.Scopes, Resource: t.resource, Issuer: t.issuer, RevocationURL: t.meta.RevocationEndpoint,
	}
	if scope, ok := tok.Extra("scope").(string); ok && scope != "" {
		g.Scopes = strings.Fields(scope)
	}
	switch {
	case c.ClientSecret == "":
		g.AuthStyle = AuthNone
	case c.Endpoint.AuthStyle == oauth2.AuthStyleInParams:
		g.AuthStyle = AuthPost
	default:
		g.AuthStyle = AuthBasic
	}
	return g
}

// discoveryTimeout bounds finding which authorization server a server
// uses now.
const discoveryTimeout = 15 * time.Second

// DiscoverIssuer finds the authorization server srv uses now, as a login
// would (an unauthorized request, then its protected resource metadata):
// grants of any other issuer are not for it. "" when the server names
// none; an error when it cannot be reached.
func DiscoverIssuer(ctx context.Context, client *http.Client, srv *config.Server) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	challenges, err := probe(ctx, client, srv)
	if err != nil {
		return "", err
	}
	prm, err := findResourceMetadata(ctx, client, srv.URL, challenges)
	if err != nil {
		return "", fmt.Errorf("server %q: no protected resource metadata within %s", srv.ID, discoveryTimeout)
	}
	if prm == nil {
		return "", nil
	}
	return prm.AuthorizationServers[0], nil
}
