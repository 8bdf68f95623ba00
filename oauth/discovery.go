package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Discovery of an MCP server's authorization server, as the MCP
// authorization spec has a client do it: the protected resource metadata
// (RFC 9728) named by the server's 401 or found at the well-known URLs,
// then the authorization server's metadata (RFC 8414, or OpenID Connect
// discovery) with the well-known part inserted before the issuer's path.
// Every document is read through discoveryClient: bounded in size and
// time, JSON only, and fetched from no private or link-local address.

// maxMetadata bounds a metadata document.
const maxMetadata = 1 << 20

// resourceMetadata is what is used of RFC 9728 protected resource metadata.
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// serverMetadata is what is used of RFC 8414 authorization server metadata
// (or an OpenID Connect provider's configuration).
type serverMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
}

// statusError is a metadata URL's answer other than 200.
type statusError struct{ status int }

func (e *statusError) Error() string { return fmt.Sprintf("answered HTTP %d", e.status) }

// metadataCandidates are the URLs protected resource metadata may be at,
// in the order to try them, each with the resource it must name: the one
// the server's 401 names, then the well-known URL with the server's path,
// then the one at the root, which names the root. The resource is the
// server's canonical URI (resourceURI).
func metadataCandidates(serverURL string, challenges []challenge) [][2]string {
	u, err := resourceURI(serverURL)
	if err != nil {
		return nil
	}
	resource := u.String()
	var candidates [][2]string // metadata URL, resource it is for
	if m := bearerParam(challenges, "resource_metadata"); m != "" {
		candidates = append(candidates, [2]string{m, resource})
	} else {
		for _, c := range challenges {
			if m := c.params["resource_metadata"]; m != "" {
				candidates = append(candidates, [2]string{m, resource})
				break
			}
		}
	}
	root := *u
	root.Path, root.RawPath = "", ""
	at := root
	at.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	rootMeta := root
	rootMeta.Path = "/.well-known/oauth-protected-resource"
	return append(candidates, [2]string{at.String(), resource}, [2]string{rootMeta.String(), root.String()})
}

// getResourceMetadata reads the protected resource metadata at metaURL,
// which must name resource and at least one authorization server, each a
// web URL.
func getResourceMetadata(ctx context.Context, client *http.Client, metaURL, resource string) (*resourceMetadata, error) {
	var m resourceMetadata
	if err := getMetadata(ctx, client, metaURL, &m); err != nil {
		return nil, err
	}
	if m.Resource != resource {
		return nil, fmt.Errorf("protected resource metadata at %s is for another resource", redactURL(metaURL))
	}
	if len(m.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("protected resource metadata at %s names no authorization server", redactURL(metaURL))
	}
	for _, as := range m.AuthorizationServers {
		if err := endpointURL(as); err != nil {
			return nil, fmt.Errorf("protected resource metadata at %s: authorization server %w", redactURL(metaURL), err)
		}
	}
	return &m, nil
}

// findResourceMetadata tries the candidates in turn and returns the first
// usable document; nil when there is none.
func findResourceMetadata(ctx context.Context, client *http.Client, serverURL string, challenges []challenge) (*resourceMetadata, error) {
	for _, c := range metadataCandidates(serverURL, challenges) {
		m, err := getResourceMetadata(ctx, client, c[0], c[1])
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, nil
}

// serverMetadataURLs are the URLs an issuer's metadata may be at, in the
// order the MCP authorization spec gives: OAuth, then OpenID Connect with
// the well-known part inserted, then OpenID Connect appended to the path.
func serverMetadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	base := url.URL{Scheme: u.Scheme, Host: u.Host}
	path := strings.Trim(u.Path, "/")
	at := func(p string) string {
		v := base
		v.Path = p
		return v.String()
	}
	if path == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}
	}
	return []string{
		at("/.well-known/oauth-authorization-server/" + path),
		at("/.well-known/openid-configuration/" + path),
		at("/" + path + "/.well-known/openid-configuration"),
	}
}

// getServerMetadata reads issuer's metadata from the first of its
// well-known URLs that has it. nil, nil when every one answers 4xx: the
// server publishes none. A document that names another issuer, offers no
// PKCE with S256, or has an endpoint that is not a web URL is an error.
func getServerMetadata(ctx context.Context, client *http.Client, issuer string) (*serverMetadata, error) {
	if err := endpointURL(issuer); err != nil {
		return nil, fmt.Errorf("the authorization server %w", err)
	}
	for _, metaURL := range serverMetadataURLs(issuer) {
		var m serverMetadata
		err := getMetadata(ctx, client, metaURL, &m)
		var se *statusError
		if errors.As(err, &se) && se.status >= 400 && se.status < 500 {
			continue
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("the metadata at %s names the issuer %q, not %q", redactURL(metaURL), safeText(m.Issuer), safeText(issuer))
		}
		if !contains(m.CodeChallengeMethodsSupported, "S256") {
			return nil, fmt.Errorf("the authorization server %s does not offer PKCE with S256 (code_challenge_methods_supported), which MCP requires", safeText(issuer))
		}
		for _, e := range []struct{ name, url string }{
			{"authorization_endpoint", m.AuthorizationEndpoint}, {"token_endpoint", m.TokenEndpoint},
			{"registration_endpoint", m.RegistrationEndpoint}, {"revocation_endpoint", m.RevocationEndpoint},
		} {
			if e.url == "" {
				continue
			}
			if err := endpointURL(e.url); err != nil {
				return nil, fmt.Errorf("the authorization server's %s %w", e.name, err)
			}
		}
		return &m, nil
	}
	return nil, nil
}

// getMetadata GETs a JSON metadata document into v.
func getMetadata(ctx context.Context, client *http.Client, metaURL string, v any) error {
	if err := endpointURL(metaURL); err != nil {
		return fmt.Errorf("metadata URL %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metaURL, nil)
	if err != nil {
		return errors.New("metadata URL is not a URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := discoveryClient(client).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", redactURL(metaURL), plainErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return &statusError{status: resp.StatusCode}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return fmt.Errorf("%s answered %q, not application/json", redactURL(metaURL), safeCode(mt))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	if err != nil {
		return fmt.Errorf("%s: reading: %w", redactURL(metaURL), err)
	}
	if len(body) > maxMetadata {
		return fmt.Errorf("%s: the document is over %d bytes", redactURL(metaURL), maxMetadata)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: not a JSON object of the expected form", redactURL(metaURL))
	}
	return nil
}

// endpointURL accepts an https URL, or an http one to a loopback host,
// that names no private, link-local or otherwise non-public address.
func endpointURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("is not a URL")
	}
	if err := webURL(u); err != nil {
		return fmt.Errorf("%w; only https (or http on loopback) is used", err)
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && nonPublic(ip) {
		return fmt.Errorf("names the non-public address %s", ip)
	}
	return nil
}

// nonPublic reports an address that a URL taken from a server's document
// must not reach: private (RFC 1918, RFC 4193), link-local (the cloud
// metadata address among them), carrier-grade NAT, multicast, unspecified.
// Loopback is allowed: it is the machine's own, where a test or a local
// server runs.
func nonPublic(ip netip.Addr) bool {
	ip = ip.Unmap()
	return !ip.IsValid() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || cgnat.Contains(ip)
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// maxDiscoveryRedirects bounds the redirects of one metadata request when
// the client has no policy of its own.
const maxDiscoveryRedirects = 5

// discoveryClient is client for reading metadata documents, whose URLs
// come from the servers themselves: when client dials directly (Go's
// transport, no proxy), it does not connect to a non-public address
// whatever a name resolves to; without a redirect policy of its own it
// follows few redirects and none from https to http.
func discoveryClient(client *http.Client) *http.Client {
	c := *client
	if c.Timeout == 0 {
		c.Timeout = discoveryTimeout
	}
	if t := guardedTransport(c.Transport); t != nil {
		c.Transport = t
	}
	if c.CheckRedirect == nil {
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxDiscoveryRedirects {
				return fmt.Errorf("more than %d redirects", maxDiscoveryRedirects)
			}
			if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return errors.New("a redirect from https to http")
			}
			return nil
		}
	}
	return &c
}

// guardedTransport is rt with a dialer that refuses non-public addresses;
// nil when rt is not Go's own transport dialing directly.
func guardedTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok || t.DialContext != nil || t.DialTLSContext != nil || t.Dial != nil || t.DialTLS != nil {
		return nil
	}
	if t.Proxy != nil {
		probe, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
		if u, err := t.Proxy(probe); err == nil && u != nil {
			return nil // the proxy connects, and decides
		}
	}
	guarded := t.Clone()
	guarded.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				host = address
			}
			ip, err := netip.ParseAddr(host)
			if err != nil || nonPublic(ip) {
				return fmt.Errorf("refusing to fetch metadata from the non-public address %s", host)
			}
			return nil
		}}).DialContext
	return guarded
}

// redactURL is s without user information or query, for an error text.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(not a URL)"
	}
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return safeText(v.String())
}

// safeText keeps text from a server printable and of bounded length.
func safeText(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
