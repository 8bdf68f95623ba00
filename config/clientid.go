package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// OAuthClient is the top-level oauth section: how the aggregator identifies
// itself to the authorization servers of upstream servers that need a
// login.
type OAuthClient struct {
	// ClientIDURL is the URL of the aggregator's client ID metadata
	// document (draft-ietf-oauth-client-id-metadata-document): its OAuth
	// client_id at every authorization server that accepts such documents.
	// "" when not set.
	ClientIDURL string
	// ClientName is the document's client_name; "" for DefaultClientName.
	ClientName string
}

// DefaultClientName is the client_name the aggregator gives itself at
// authorization servers unless oauth.client_name is set.
const DefaultClientName = "mcp-aggregator"

// Bounds of the client ID metadata document's values.
const (
	MaxClientIDURL  = 512
	MaxClientName   = 100
	oauthSectionKey = "oauth"
)

// gatewayPaths are the paths serve --http answers itself, which a
// document served beside them cannot have.
var gatewayPaths = []string{"/mcp", LoginCallbackPath, LogoutPath, "/drain", "/healthz", "/readyz", "/metrics", "/status", "/status.json", "/.well-known/oauth-protected-resource"}

// CheckClientIDURL says what is wrong with s as a client ID metadata
// document URL, nil when nothing: https with a host and a path, no user,
// query, fragment or dot segments, as the draft requires; plain http only
// to a loopback host, where a test serves it.
func CheckClientIDURL(s string) error {
	if len(s) > MaxClientIDURL {
		return fmt.Errorf("is %d bytes long; a client ID URL is at most %d", len(s), MaxClientIDURL)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("is not an absolute URL")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return errors.New("uses plain http; the authorization server fetches the document from it, which must be https (http only on a loopback host, for a test)")
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("uses the scheme %q; use https", u.Scheme)
	case u.User != nil:
		return errors.New("holds a user or password; remove it")
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("has a query; a client ID URL names the document by its path alone")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return errors.New("has a fragment; remove it")
	case u.Path == "" || u.Path == "/":
		return errors.New("has no path; name the document, e.g. https://gateway.example.com/oauth/client.json")
	}
	for _, p := range gatewayPaths {
		if u.Path == p || strings.HasPrefix(u.Path, p+"/") {
			return fmt.Errorf("has the path %s, which the gateway (serve --http) serves itself; choose another, e.g. /oauth/client.json", p)
		}
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if seg == "." || seg == ".." {
			return errors.New("has a . or .. path segment; write the path as it is")
		}
	}
	return nil
}

// checkClientName says what is wrong with a client_name.
func checkClientName(s string) error {
	switch {
	case s == "":
		return errors.New("is empty; remove it for the default, mcp-aggregator")
	case len(s) > MaxClientName:
		return fmt.Errorf("is %d bytes long; at most %d", len(s), MaxClientName)
	case !utf8.ValidString(s):
		return errors.New("is not UTF-8 text")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return errors.New("holds a control character")
		}
	}
	return nil
}

// readOAuthSection reads the top-level oauth section.
func readOAuthSection(r *reader, n *yaml.Node) *OAuthClient {
	if !r.mapping(n, oauthSectionKey, "client_id_url, client_name") || isNull(deref(n)) {
		return nil
	}
	f := r.fields(deref(n), oauthSectionKey+".", "client_id_url", "client_name")
	o := &OAuthClient{}
	if p, ok := f["client_id_url"]; ok {
		if t, ok := r.text(p.v, "oauth.client_id_url"); ok {
			if err := CheckClientIDURL(t.s); err != nil {
				r.errorf(p.v.Line, "oauth.client_id_url", "%s %v", t.quoted(), err)
			} else {
				o.ClientIDURL = t.s
			}
		}
	}
	if p, ok := f["client_name"]; ok {
		if t, ok := r.text(p.v, "oauth.client_name"); ok {
			if err := checkClientName(t.s); err != nil {
				r.errorf(p.v.Line, "oauth.client_name", "%v", err)
			} else {
				o.ClientName = t.s
			}
		}
	}
	return o
}

// applyOAuth gives a server with auth: {type: oauth} the workspace's
// client ID URL and name, unless its own auth sets a client ID URL.
func applyOAuth(s *Server, o OAuthClient) {
	if s.Auth.Type != ServerAuthOAuth {
		return
	}
	if s.Auth.ClientIDURL == "" {
		s.Auth.ClientIDURL = o.ClientIDURL
	}
	if s.Auth.ClientName == "" {
		s.Auth.ClientName = o.ClientName
	}
}

// ClientIDURLs are the distinct client ID metadata document URLs of the
// workspace (the top-level one, and those of servers without a
// pre-registered client), each with the client name its document
// carries: the documents `serve --http` serves.
func (ws *Workspace) ClientIDURLs() map[string]string {
	out := map[string]string{}
	if ws.OAuthClient.ClientIDURL != "" {
		out[ws.OAuthClient.ClientIDURL] = ws.OAuthClient.ClientName
	}
	for _, s := range ws.Servers {
		if s.Auth.Type == ServerAuthOAuth && s.Auth.ClientIDURL != "" && s.Auth.ClientID == "" { // a pre-registered client comes first
			if _, ok := out[s.Auth.ClientIDURL]; !ok {
				out[s.Auth.ClientIDURL] = s.Auth.ClientName
			}
		}
	}
	return out
}
