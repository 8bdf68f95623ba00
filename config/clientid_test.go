package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClientIDURLRead(t *testing.T) {
	ws := loadValid(t, `version: 1
oauth:
  client_id_url: https://gateway.example.com/oauth/client.json
  client_name: Team gateway
servers:
  linear:
    url: https://mcp.example.com/mcp
    auth: {type: oauth}
  own:
    url: https://mcp.example.com/own
    auth: {type: oauth, client_id_url: "https://other.example.com/client.json"}
  preregistered:
    url: https://mcp.example.com/pre
    auth: {type: oauth, client_id: c}
  open:
    url: https://mcp.example.com/open
  unused:
    url: https://mcp.example.com/unused
    auth: {type: oauth, client_id: c, client_id_url: "https://unused.example.com/client.json"}
`, nil)
	assert.Equal(t, OAuthClient{ClientIDURL: "https://gateway.example.com/oauth/client.json", ClientName: "Team gateway"}, ws.OAuthClient)
	assert.Equal(t, ServerAuth{Type: ServerAuthOAuth, ClientIDURL: "https://gateway.example.com/oauth/client.json", ClientName: "Team gateway"}, ws.Servers[0].Auth)
	assert.Equal(t, "https://other.example.com/client.json", ws.Servers[1].Auth.ClientIDURL, "a server's own URL wins")
	assert.Equal(t, "c", ws.Servers[2].Auth.ClientID)
	assert.Equal(t, ServerAuth{}, ws.Servers[3].Auth, "a server without auth gets nothing")
	assert.Equal(t, map[string]string{
		"https://gateway.example.com/oauth/client.json": "Team gateway",
		"https://other.example.com/client.json":         "Team gateway",
	}, ws.ClientIDURLs())
}

func TestClientIDURLProblems(t *testing.T) {
	tests := []struct{ name, section, field, want string }{
		{"plain http", "oauth: {client_id_url: 'http://gateway.example.com/c.json'}", "oauth.client_id_url", "must be https"},
		{"no path", "oauth: {client_id_url: 'https://gateway.example.com'}", "oauth.client_id_url", "has no path"},
		{"root path", "oauth: {client_id_url: 'https://gateway.example.com/'}", "oauth.client_id_url", "has no path"},
		{"query", "oauth: {client_id_url: 'https://gateway.example.com/c.json?v=1'}", "oauth.client_id_url", "has a query"},
		{"fragment", "oauth: {client_id_url: 'https://gateway.example.com/c.json#x'}", "oauth.client_id_url", "fragment"},
		{"user", "oauth: {client_id_url: 'https://me:pw@gateway.example.com/c.json'}", "oauth.client_id_url", "user or password"},
		{"dot segment", "oauth: {client_id_url: 'https://gateway.example.com/a/../c.json'}", "oauth.client_id_url", ". or .. path segment"},
		{"other scheme", "oauth: {client_id_url: 'ftp://gateway.example.com/c.json'}", "oauth.client_id_url", "use https"},
		{"too long", "oauth: {client_id_url: 'https://gateway.example.com/" + strings.Repeat("a", MaxClientIDURL) + "'}", "oauth.client_id_url", "at most 512"},
		{"a gateway path", "oauth: {client_id_url: 'https://gateway.example.com/mcp'}", "oauth.client_id_url", "serves itself"},
		{"under the metadata path", "oauth: {client_id_url: 'https://gateway.example.com/.well-known/oauth-protected-resource/x'}", "oauth.client_id_url", "serves itself"},
		{"empty name", "oauth: {client_name: ''}", "oauth.client_name", "is empty"},
		{"long name", "oauth: {client_name: '" + strings.Repeat("n", MaxClientName+1) + "'}", "oauth.client_name", "at most 100"},
		{"not a mapping", "oauth: https://gateway.example.com/c.json", "oauth", "must be a mapping"},
		{"server's own", "", "auth.client_id_url", "has no path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth := "{type: oauth}"
			if tt.section == "" {
				auth = "{type: oauth, client_id_url: 'https://gateway.example.com'}"
			}
			assertAuthError(t, "version: 1\n"+tt.section+"\n", auth, nil, tt.field, tt.want)
		})
	}
}

func TestClientIDURLLoopbackHTTP(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/c.json", "http://localhost/c.json", "http://[::1]:9/oauth/c.json"} {
		assert.NoError(t, CheckClientIDURL(u), u)
	}
}

func TestClientIDURLBesideClientID(t *testing.T) {
	_, problems := loadYAML(t, `version: 1
servers:
  s:
    url: https://mcp.example.com/mcp
    auth: {type: oauth, client_id: c, client_id_url: "https://gateway.example.com/c.json"}
`, nil)
	p := problemAt(t, problems, "auth.client_id_url")
	assert.Equal(t, SeverityWarning, p.Severity)
	assert.Contains(t, p.Message, "pre-registered client comes first")
}
