package oauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

// The flow itself (protected resource metadata from the 401's
// WWW-Authenticate or the well-known URLs, authorization server metadata
// with path insertion, dynamic client registration or a pre-registered
// client, scope selection, PKCE S256, the resource parameter, the RFC 9207
// iss check, the code exchange) is the official Go SDK's
// auth.AuthorizationCodeHandler, which builds on golang.org/x/oauth2. What
// this file adds is what a command-line login needs around it: the
// loopback redirect listener, the first unauthorized request, and turning
// the result into a stored Grant. (mcp-go's client OAuthHandler was the
// other candidate; it does discovery and registration too, but checks no
// iss on the redirect and skips the root well-known fallback for protected
// resource metadata.) Client ID metadata documents are not
// offered: they need an https URL serving the client's metadata, which a
// command-line tool does not have.

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
	// ClientName is the name registered by dynamic client registration.
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

	req, challenge, err := probe(ctx, client, srv)
	if err != nil {
		return nil, err
	}
	// The flow's POSTs carry a client secret, a code and its verifier in
	// their bodies: a 307 or 308 to another origin is not followed.
	client = sameorigin.Client(client, sameorigin.Policy{NoBody: true})
	var (
		authURL  string
		oauthCfg *oauth2.Config
		token    *oauth2.Token
	)
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:         cb.redirectURI(),
		RequestRefreshToken: true,
		Client:              client,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			authURL = args.URL
			u, err := url.Parse(args.URL)
			if err != nil {
				return nil, fmt.Errorf("the authorization endpoint is not a URL: %w", err)
			}
			if err := webURL(u); err != nil {
				// It is opened in a browser or handed to a client to open:
				// another scheme could launch a local program.
				return nil, fmt.Errorf("the authorization server's authorization_endpoint %w; only https (or http on loopback) is opened", err)
			}
			cb.expect(u.Query().Get("state"))
			if opts.Authorize != nil {
				opts.Authorize(args.URL)
			}
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r, err := cb.wait(wctx)
			if err != nil {
				return nil, err
			}
			if r.err != "" {
				return nil, fmt.Errorf("the authorization server answered %s instead of a code; run login again and approve the request", safeCode(r.err))
			}
			return &auth.AuthorizationResult{Code: r.code, State: r.state, Iss: r.iss}, nil
		},
		NewTokenSource: func(_ context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			oauthCfg, token = c, t
			return oauth2.StaticTokenSource(t), nil
		},
	}
	if srv.Auth.ClientID != "" {
		cfg.PreregisteredClient = &oauthex.ClientCredentials{ClientID: srv.Auth.ClientID}
		if srv.Auth.ClientSecret != "" {
			cfg.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: srv.Auth.ClientSecret}
		}
	} else {
		name := opts.ClientName
		if name == "" {
			name = "mcp-aggregator"
		}
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{cb.redirectURI()},
			ClientName:              name,
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: string(AuthNone),
		}}
	}
	if len(srv.Auth.Scopes) > 0 {
		scopes := srv.Auth.Scopes
		cfg.ScopeFilter = func([]string) []string { return append([]string(nil), scopes...) }
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, err
	}
	// The flow names the server by the URL of the request it is given: its
	// canonical URI, never the URL with the credentials it may carry.
	resource, err := resourceURI(srv.URL)
	if err != nil {
		return nil, fmt.Errorf("server %q: url: %w", srv.ID, err)
	}
	named := req.Clone(ctx)
	named.URL = resource
	if err := h.Authorize(ctx, named, challenge); err != nil {
		return nil, fmt.Errorf("server %q: login failed: %w", srv.ID, err)
	}
	if token == nil || oauthCfg == nil || token.AccessToken == "" {
		return nil, fmt.Errorf("server %q: login failed: the authorization server issued no access token", srv.ID)
	}
	return grantOf(ctx, client, srv, challenge, authURL, oauthCfg, token), nil
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
// returns it with the server's answer, which names the protected resource
// metadata. A server that does not answer 401 still gets the flow, from
// the well-known URLs. The server's configured headers go to its origin
// alone: a redirect elsewhere is followed without them.
func probe(ctx context.Context, client *http.Client, srv *config.Server) (*http.Request, *http.Response, error) {
	client = sameorigin.Client(client, sameorigin.Policy{Headers: sameorigin.HeaderNames(srv.Headers)})
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-aggregator-login","version":"0"}}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("server %q: url: %w", srv.ID, err)
	}
	for k, v := range srv.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may hold secrets
		}
		return nil, nil, fmt.Errorf("server %q: cannot reach it: %w", srv.ID, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	challenge := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody, Request: req}
	if resp.StatusCode == http.StatusUnauthorized {
		challenge.Header = resp.Header.Clone()
	}
	return req, challenge, nil
}

// grantOf turns the flow's result into a Grant. The resource is the one
// the authorization request named; the issuer is looked up again from the
// same metadata the flow used, for the record (the SDK keeps it to itself).
func grantOf(ctx context.Context, client *http.Client, srv *config.Server, challenge *http.Response, authURL string, c *oauth2.Config, t *oauth2.Token) *Grant {
	g := &Grant{
		Server: srv.URL, TokenURL: c.Endpoint.TokenURL, ClientID: c.ClientID, ClientSecret: c.ClientSecret,
		AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken, Expiry: t.Expiry,
		Obtained: time.Now(), Scopes: c.Scopes,
	}
	if u, err := url.Parse(authURL); err == nil {
		g.Resource = u.Query().Get("resource")
	}
	if scope, ok := t.Extra("scope").(string); ok && scope != "" {
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
	g.Issuer, g.RevocationURL = issuerOf(ctx, client, srv.URL, challenge)
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
	_, challenge, err := probe(ctx, client, srv)
	if err != nil {
		return "", err
	}
	for _, c := range metadataCandidates(srv.URL, challenge) {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c[0], c[1], client)
		if err == nil && prm != nil && len(prm.AuthorizationServers) > 0 {
			return prm.AuthorizationServers[0], nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("server %q: no protected resource metadata within %s", srv.ID, discoveryTimeout)
		}
	}
	return "", nil
}

// issuerOf finds the issuer of srv's authorization server as the flow did,
// and its revocation endpoint: protected resource metadata (advertised,
// then at the endpoint's path, then at the root), then that server's
// metadata. "" when it cannot tell.
func issuerOf(ctx context.Context, client *http.Client, serverURL string, challenge *http.Response) (issuer, revocation string) {
	for _, c := range metadataCandidates(serverURL, challenge) {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c[0], c[1], client)
		if err != nil || prm == nil || len(prm.AuthorizationServers) == 0 {
			continue
		}
		if asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], client); err == nil && asm != nil {
			return asm.Issuer, asm.RevocationEndpoint
		}
		return prm.AuthorizationServers[0], ""
	}
	return "", ""
}

// metadataCandidates are the URLs protected resource metadata may be at,
// in the order to try them, each with the resource it must name: the
// server's canonical URI (resourceURI), as in the flow itself.
func metadataCandidates(serverURL string, challenge *http.Response) [][2]string {
	u, err := resourceURI(serverURL)
	if err != nil {
		return nil
	}
	resource := u.String()
	var candidates [][2]string // metadata URL, resource it is for
	if cs, err := oauthex.ParseWWWAuthenticate(challenge.Header.Values("WWW-Authenticate")); err == nil {
		for _, c := range cs {
			if u := c.Params["resource_metadata"]; u != "" {
				candidates = append(candidates, [2]string{u, resource})
			}
		}
	}
	root := *u
	root.Path, root.RawPath = "", ""
	at := *u
	at.Path, at.RawPath = "/.well-known/oauth-protected-resource/"+strings.TrimLeft(u.Path, "/"), ""
	rootMeta := root
	rootMeta.Path = "/.well-known/oauth-protected-resource"
	return append(candidates, [2]string{at.String(), resource}, [2]string{rootMeta.String(), root.String()})
}
