package config

import (
	"net/url"
)

// exchangeSettings reads what only a token exchange uses (audience,
// token_endpoint) and checks what it needs (a client of its own at the
// issuer). The issuer, when token_endpoint is not set, comes with the
// workspace (finishExchange).
func (s *serverReader) exchangeSettings(f map[string]pair, a *ServerAuth) {
	for _, key := range []string{"audience", "token_endpoint"} {
		p, ok := f[key]
		if !ok {
			continue
		}
		field := "auth." + key
		if a.Type != ServerAuthTokenExchange {
			s.errorf(p.k.Line, field, "applies to type: token_exchange only; remove it")
			continue
		}
		t, ok := s.text(p.v, field)
		if !ok {
			continue
		}
		switch key {
		case "audience":
			if t.s == "" || len(t.s) > 2048 || containsLineBreak(t.s) {
				s.errorf(p.v.Line, field, "must be the URI or name the issuer knows the server by, on one line, e.g. https://crm.example.com")
				continue
			}
			a.Audience = t.s
		case "token_endpoint":
			u, err := url.Parse(t.s)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" {
				s.errorf(p.v.Line, field, "must be an absolute https URL without credentials or fragment, e.g. https://issuer.example.com/oauth/token")
				continue
			}
			if u.Scheme == "http" && !isLoopback(u.Hostname()) {
				s.errorf(p.v.Line, field, "sends every caller's token in clear over http; use https (http is for loopback only)")
				continue
			}
			a.TokenEndpoint = t.s
		}
	}
	if a.Type == ServerAuthTokenExchange {
		if _, ok := f["client_id"]; !ok {
			s.errorf(f["type"].k.Line, "auth.client_id", "token_exchange needs the aggregator's own client at the issuer; add client_id (and client_secret: {env: VAR} for a confidential client)")
		}
	}
}

// finishExchange gives a token exchange without token_endpoint the
// gateway's issuer, or says it has none.
func finishExchange(d *serverDef, ws *Workspace) {
	a := &d.srv.Auth
	if a.Type != ServerAuthTokenExchange || a.TokenEndpoint != "" {
		return
	}
	if ws.HTTP.Auth.OAuth == nil {
		d.problems.errorf(d.authLine, "auth.token_endpoint", "token_exchange trades the caller's access token at the gateway's issuer, and http.auth.oauth is not set; set http.auth.oauth or auth.token_endpoint")
		return
	}
	a.Issuer = ws.HTTP.Auth.OAuth.Issuer
}

// warnPrincipalHeaders warns about per-principal headers that no caller
// can fill: without http.auth every caller is anonymous.
func warnPrincipalHeaders(d *serverDef, ws *Workspace) {
	if len(d.srv.PrincipalHeaders) == 0 || ws.HTTP.Auth.Enabled() || d.srv.Transport == TransportStdio {
		return
	}
	d.problems.warnf(d.headersLine, "headers", "{principal: ...} values are filled from the caller's credentials, and http.auth is not set: these headers are never sent; set http.auth")
}
