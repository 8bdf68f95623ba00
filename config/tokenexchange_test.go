package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gatewayOAuth = `http:
  auth:
    oauth: {issuer: https://issuer.example.com, audience: https://gw.example.com/mcp}
`

func TestTokenExchangeRead(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\n"+gatewayOAuth+`servers:
  crm:
    url: https://crm.example.com/mcp
    auth:
      type: token_exchange
      client_id: gateway
      client_secret: {env: GW_SECRET}
      audience: https://crm.example.com
      scopes: [crm.read]
  billing:
    url: https://billing.example.com/mcp
    auth: {type: token_exchange, client_id: gateway, token_endpoint: https://other.example.com/token, service: client_credentials}
`, map[string]string{"GW_SECRET": "gw-s3cret"})
	require.NotNil(t, ws, render(problems))
	require.False(t, HasErrors(problems), render(problems))
	assert.Equal(t, ServerAuth{Type: ServerAuthTokenExchange, ClientID: "gateway", ClientSecret: "gw-s3cret", Scopes: []string{"crm.read"},
		Audience: "https://crm.example.com", Issuer: "https://issuer.example.com"}, ws.Servers[0].Auth)
	assert.Equal(t, ServerAuth{Type: ServerAuthTokenExchange, ClientID: "gateway", TokenEndpoint: "https://other.example.com/token",
		Service: ServiceClientCredentials}, ws.Servers[1].Auth)
	assert.Contains(t, ws.Secrets(), "gw-s3cret")
}

func TestTokenExchangeProblems(t *testing.T) {
	tests := []struct {
		name, auth, field, want string
		noGateway               bool
	}{
		{name: "no client", auth: "{type: token_exchange}", field: "auth.client_id", want: "add client_id"},
		{name: "no issuer", auth: "{type: token_exchange, client_id: g}", field: "auth.token_endpoint", want: "http.auth.oauth is not set", noGateway: true},
		{name: "clear-text endpoint", auth: "{type: token_exchange, client_id: g, token_endpoint: 'http://issuer.example.com/token'}", field: "auth.token_endpoint", want: "use https"},
		{name: "not a URL", auth: "{type: token_exchange, client_id: g, token_endpoint: token}", field: "auth.token_endpoint", want: "absolute https URL"},
		{name: "audience with oauth", auth: "{type: oauth, audience: x}", field: "auth.audience", want: "token_exchange only"},
		{name: "service with a shared login", auth: "{type: oauth, service: login}", field: "auth.service", want: "remove it"},
		{name: "unknown service", auth: "{type: token_exchange, client_id: g, service: password}", field: "auth.service", want: "use client_credentials"},
		{name: "login for an exchange", auth: "{type: token_exchange, client_id: g, service: login}", field: "auth.service", want: "use client_credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head := "version: 1\n"
			if !tt.noGateway {
				head += gatewayOAuth
			}
			assertAuthError(t, head, tt.auth, nil, tt.field, tt.want)
		})
	}
}

func TestPrincipalHeadersWithoutGatewayAuth(t *testing.T) {
	_, problems := loadYAML(t, "version: 1\nservers:\n  s:\n    url: https://mcp.example.com/mcp\n    headers: {X-User: {principal: subject}}\n", nil)
	p := problemAt(t, problems, "headers")
	assert.Equal(t, SeverityWarning, p.Severity)
	assert.Contains(t, p.Message, "set http.auth")
	assert.Equal(t, 5, p.Line)
}

func TestPerUserLoginsRead(t *testing.T) {
	ws := loadValid(t, `version: 1
http:
  auth:
    oauth: {issuer: https://issuer.example.com, audience: https://gw.example.com/mcp}
    user_logins: {key: {env: VAULT_KEY}}
servers:
  linear:
    url: https://mcp.example.com/mcp
    auth: {type: oauth, per_user: true, service: login}
`, map[string]string{"VAULT_KEY": "k3y-value"})
	assert.Equal(t, &UserLogins{Key: "k3y-value", Callback: "https://gw.example.com/oauth/callback",
		MaxUnused: DefaultMaxUnused, MaxLogins: DefaultMaxLogins}, ws.HTTP.Auth.UserLogins)
	assert.True(t, ws.Servers[0].Auth.PerUser)
	assert.Equal(t, ServiceLogin, ws.Servers[0].Auth.Service)
	assert.Contains(t, ws.Secrets(), "k3y-value")

	ws = loadValid(t, `version: 1
http:
  auth:
    oauth: {issuer: https://issuer.example.com, audience: https://gw.example.com/mcp}
    user_logins: {key: {env: VAULT_KEY}, max_unused: 720h, max_logins: 50}
`, map[string]string{"VAULT_KEY": "k3y-value"})
	assert.Equal(t, 30*24*time.Hour, ws.HTTP.Auth.UserLogins.MaxUnused)
	assert.Equal(t, 50, ws.HTTP.Auth.UserLogins.MaxLogins)
	_, problems := loadYAML(t, "version: 1\n"+gatewayOAuth+"    user_logins: {key: {env: VAULT_KEY}, max_logins: many}\n", map[string]string{"VAULT_KEY": "k"})
	assert.Equal(t, SeverityError, problemAt(t, problems, "http.auth.user_logins.max_logins").Severity)
}

func TestPerUserLoginsProblems(t *testing.T) {
	tests := []struct {
		name, http, auth, field, want string
	}{
		{name: "no http.auth", auth: "{type: oauth, per_user: true}", field: "auth.per_user", want: "http.auth is not set"},
		{name: "no user_logins", http: "  auth: {tokens: {a: {env: T}}}\n", auth: "{type: oauth, per_user: true}", field: "auth.per_user", want: "needs http.auth.user_logins"},
		{name: "per_user on exchange", http: "  auth: {tokens: {a: {env: T}}}\n", auth: "{type: token_exchange, client_id: c, token_endpoint: 'https://i.example.com/t', per_user: true}", field: "auth.per_user", want: "type: oauth only"},
		{name: "no key", http: "  auth: {tokens: {a: {env: T}}, user_logins: {callback: 'https://gw.example.com/oauth/callback'}}\n", auth: "{type: oauth}", field: "http.auth.user_logins.key", want: "openssl rand"},
		{name: "key in the file", http: "  auth: {tokens: {a: {env: T}}, user_logins: {key: abc, callback: 'https://gw.example.com/oauth/callback'}}\n", auth: "{type: oauth}", field: "http.auth.user_logins.key", want: "must be {env: VAR}"},
		{name: "no callback", http: "  auth: {tokens: {a: {env: T}}, user_logins: {key: {env: T}}}\n", auth: "{type: oauth}", field: "http.auth.user_logins.callback", want: "required without http.auth.oauth"},
		{name: "unknown per-user service", http: "  auth: {tokens: {a: {env: T}}, user_logins: {key: {env: T}, callback: 'https://gw.example.com/oauth/callback'}}\n", auth: "{type: oauth, per_user: true, service: client_credentials}", field: "auth.service", want: "use login"},
		{name: "callback elsewhere", http: "  auth: {tokens: {a: {env: T}}, user_logins: {key: {env: T}, callback: 'https://gw.example.com/cb'}}\n", auth: "{type: oauth}", field: "http.auth.user_logins.callback", want: "/oauth/callback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head := "version: 1\n"
			if tt.http != "" {
				head += "http:\n" + tt.http
			}
			assertAuthError(t, head, tt.auth, map[string]string{"T": "t0ken"}, tt.field, tt.want)
		})
	}
}
