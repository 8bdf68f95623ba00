package config

import (
	"net/http"
	"strings"

	"gopkg.in/yaml.v3"
)

// ServerAuth is a remote server's auth: how the aggregator authorizes itself
// at that server. The zero value means no authorization beyond the
// configured headers.
type ServerAuth struct {
	Type         ServerAuthType
	ClientID     string   // pre-registered client; empty: dynamic client registration
	ClientSecret string   // resolved (a secret value!); only with ClientID
	Scopes       []string // empty: what the server's metadata asks for
	// Audience is what a token exchange asks a token for (RFC 8693
	// audience); default the server's url.
	Audience string
	// TokenEndpoint is where a token exchange is made; "" means the token
	// endpoint of Issuer's metadata.
	TokenEndpoint string
	// Issuer is http.auth.oauth's issuer, whose metadata names the token
	// endpoint of a token exchange without TokenEndpoint.
	Issuer string
	// PerUser keeps an OAuth login per caller (type oauth): each logs in
	// through the gateway, and the server is sent the caller's own token.
	PerUser bool
	// ClientIDURL is the client ID metadata document URL used at an
	// authorization server that accepts one: the server's own
	// auth.client_id_url, else the top-level oauth.client_id_url; "" when
	// neither is set.
	ClientIDURL string
	// ClientName is the top-level oauth.client_name; "" for DefaultClientName.
	ClientName string
	// Service is the credential of the requests no caller made (the
	// server's initialize, the lists the aggregator keeps, pings, the GET
	// stream): "" sends none, ServiceClientCredentials a token the
	// aggregator gets for itself (token_exchange), ServiceLogin the
	// aggregator's own login (oauth with per_user).
	Service string
}

// The values of auth.service.
const (
	// ServiceClientCredentials (token_exchange): the aggregator's own
	// token, by the client credentials grant (RFC 6749 §4.4) of its client
	// at the issuer, for the same audience and scopes as the exchange.
	ServiceClientCredentials = "client_credentials"
	// ServiceLogin (oauth with per_user): the aggregator's own login at the
	// server, made with `mcp-aggregator login SERVER` and kept as a shared
	// server's is.
	ServiceLogin = "login"
)

// ServerAuthType names how a remote server is authorized.
type ServerAuthType string

// Server auth types.
const (
	// ServerAuthOAuth is OAuth 2.1 as the MCP authorization spec describes
	// it: discovery, authorization code with PKCE, tokens stored by
	// `mcp-aggregator login`.
	ServerAuthOAuth ServerAuthType = "oauth"
	// ServerAuthTokenExchange is OAuth 2.0 token exchange (RFC 8693): each
	// caller's access token to the gateway is traded, at the gateway's
	// issuer, for one meant for the server, sent as its bearer token.
	ServerAuthTokenExchange ServerAuthType = "token_exchange"
)

// authKeys are the keys of a server's auth mapping.
var authKeys = []string{"type", "client_id", "client_secret", "scopes", "audience", "token_endpoint", "per_user", "client_id_url", "service"}

// auth reads the server's auth mapping. Its checks against the transport
// and headers wait for checkAuth, once the transport is settled.
func (s *serverReader) auth() {
	p, ok := s.f["auth"]
	if !ok || isNull(deref(p.v)) {
		return
	}
	if !s.mapping(p.v, "auth", "type: oauth or token_exchange, and optionally client_id, client_secret, scopes, audience, token_endpoint, client_id_url, per_user, service") {
		return
	}
	f := s.fields(deref(p.v), "auth.", authKeys...)
	a := ServerAuth{}
	tp, ok := f["type"]
	if !ok {
		s.errorf(p.v.Line, "auth.type", "required; set type: oauth (a login at the server) or type: token_exchange (each caller's token exchanged)")
		return
	}
	if t, ok := s.text(tp.v, "auth.type"); ok {
		switch ServerAuthType(t.s) {
		case ServerAuthOAuth, ServerAuthTokenExchange:
			a.Type = ServerAuthType(t.s)
		default:
			s.errorf(tp.v.Line, "auth.type", "%s is not supported; use oauth or token_exchange", t.quoted())
			return
		}
	}
	s.exchangeSettings(f, &a)
	if p, ok := f["per_user"]; ok {
		if a.Type != ServerAuthOAuth {
			s.errorf(p.k.Line, "auth.per_user", "applies to type: oauth only; remove it")
		} else {
			a.PerUser, _ = s.boolean(p.v, "auth.per_user")
		}
	}
	if p, ok := f["service"]; ok {
		switch t, ok := s.text(p.v, "auth.service"); {
		case !ok:
		case a.Type == ServerAuthTokenExchange && t.s == ServiceClientCredentials, a.Type == ServerAuthOAuth && a.PerUser && t.s == ServiceLogin:
			a.Service = t.s
		case a.Type == ServerAuthTokenExchange:
			s.errorf(p.v.Line, "auth.service", "%s is not supported with token_exchange; use client_credentials (the aggregator's own token for the requests no caller made)", t.quoted())
		case a.PerUser:
			s.errorf(p.v.Line, "auth.service", "%s is not supported with per_user; use login (the aggregator's own login, made with mcp-aggregator login, for the requests no caller made)", t.quoted())
		default:
			s.errorf(p.k.Line, "auth.service", "applies to type: token_exchange or to per_user logins only; a shared login serves every request already: remove it")
		}
	}
	if c, ok := f["client_id"]; ok {
		if t, ok := s.text(c.v, "auth.client_id"); ok {
			a.ClientID = t.s
		}
	}
	if c, ok := f["client_secret"]; ok {
		v := deref(c.v)
		switch {
		case isNull(v):
		case v.Kind == yaml.MappingNode:
			a.ClientSecret, _ = s.envRef(v, "auth.client_secret")
		default:
			if t, ok := s.text(v, "auth.client_secret"); ok {
				a.ClientSecret = t.s
				if !t.fromEnv {
					s.warnf(c.v.Line, "auth.client_secret", "a secret written in the config file; prefer client_secret: {env: VAR}")
				}
			}
		}
		if a.ClientSecret != "" && a.ClientID == "" && !s.problemsFor("auth.client_id") {
			s.errorf(c.v.Line, "auth.client_secret", "needs auth.client_id (a secret belongs to a pre-registered client); add client_id or remove client_secret")
		}
	}
	if c, ok := f["client_id_url"]; ok {
		if t, ok := s.text(c.v, "auth.client_id_url"); ok {
			if err := CheckClientIDURL(t.s); err != nil {
				s.errorf(c.v.Line, "auth.client_id_url", "%s %v", t.quoted(), err)
			} else {
				a.ClientIDURL = t.s
			}
		}
		if a.ClientID != "" {
			s.warnf(c.k.Line, "auth.client_id_url", "unused: auth.client_id is set, and a pre-registered client comes first; remove one of them")
		}
	}
	if sc, ok := f["scopes"]; ok {
		for i, scope := range s.strings(sc.v, "auth.scopes") {
			if scope == "" || strings.ContainsAny(scope, " \t\r\n\"\\") {
				s.errorf(sc.v.Line, "auth.scopes", "item %d is not a scope token (no spaces, quotes or backslashes); write one scope per item", i)
				continue
			}
			a.Scopes = append(a.Scopes, scope)
		}
	}
	s.srv.Auth = a
}

// checkAuth rejects auth where it cannot work: on a stdio server, or beside
// a configured Authorization header that it would override.
func (s *serverReader) checkAuth() {
	p, ok := s.f["auth"]
	if !ok || s.srv.Auth.Type == "" {
		return
	}
	if s.srv.Transport == TransportStdio {
		s.errorf(p.k.Line, "auth", "applies to remote servers (url:) only; a stdio server gets its credentials through env; remove auth")
		return
	}
	for name := range joinKeys(s.srv.Headers, s.srv.PrincipalHeaders) {
		if http.CanonicalHeaderKey(name) == "Authorization" {
			s.errorf(p.k.Line, "auth", "set together with headers.%s, which auth: oauth replaces with its own token; remove one of them", name)
		}
	}
}

// joinKeys is the set of the keys of a and b.
func joinKeys(a, b map[string]string) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
