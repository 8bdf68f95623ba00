package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerAuthRead(t *testing.T) {
	ws := loadValid(t, `version: 1
servers:
  linear:
    url: https://mcp.example.com/mcp
    auth:
      type: oauth
      client_id: my-client
      client_secret: {env: LINEAR_SECRET}
      scopes: [read, 'write:issues']
  plain:
    url: https://mcp.example.com/other
    auth: {type: oauth}
`, map[string]string{"LINEAR_SECRET": "s3cret-value"})
	require.Len(t, ws.Servers, 2)
	assert.Equal(t, ServerAuth{Type: ServerAuthOAuth, ClientID: "my-client", ClientSecret: "s3cret-value", Scopes: []string{"read", "write:issues"}}, ws.Servers[0].Auth)
	assert.Equal(t, ServerAuth{Type: ServerAuthOAuth}, ws.Servers[1].Auth)
	assert.Contains(t, ws.Secrets(), "s3cret-value", "the client secret is scrubbed from logs")
	assert.NotEqual(t, ws.Servers[0].Hash, ws.Servers[1].Hash)
}

func TestServerAuthProblems(t *testing.T) {
	tests := []struct {
		name, auth, field, want string
		stdio                   bool
		headers                 string
	}{
		{name: "missing type", auth: "{client_id: x}", field: "auth.type", want: "set type: oauth"},
		{name: "unknown type", auth: "{type: basic}", field: "auth.type", want: "use oauth"},
		{name: "secret without id", auth: "{type: oauth, client_secret: {env: SECRET}}", field: "auth.client_secret", want: "needs auth.client_id"},
		{name: "unset secret variable", auth: "{type: oauth, client_id: c, client_secret: {env: NOPE}}", field: "auth.client_secret", want: "NOPE is not set"},
		{name: "scope with a space", auth: "{type: oauth, scopes: ['read write']}", field: "auth.scopes", want: "one scope per item"},
		{name: "not a mapping", auth: "oauth", field: "auth", want: "must be a mapping"},
		{name: "stdio server", auth: "{type: oauth}", field: "auth", want: "remote servers (url:) only", stdio: true},
		{name: "beside an Authorization header", auth: "{type: oauth}", field: "auth", want: "headers.authorization", headers: "{authorization: Bearer x}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settings := "    auth: " + tt.auth + "\n"
			if tt.headers != "" {
				settings = "    headers: " + tt.headers + "\n" + settings
			}
			ws, problems := loadYAML(t, oneServerYAML(tt.stdio, settings), map[string]string{"SECRET": "x"})
			p := problemAt(t, problems, tt.field)
			assert.Equal(t, SeverityError, p.Severity)
			assert.Contains(t, p.Message, tt.want)
			assert.Equal(t, "s", p.Server)
			require.NotNil(t, ws)
			assert.Empty(t, ws.Servers, "a server with an auth error is rejected")
		})
	}
}

func TestServerAuthLiteralSecretWarns(t *testing.T) {
	ws, problems := loadYAML(t, `version: 1
servers:
  s:
    url: https://mcp.example.com/mcp
    auth: {type: oauth, client_id: c, client_secret: literal-secret}
`, nil)
	require.NotNil(t, ws)
	p := problemAt(t, problems, "auth.client_secret")
	assert.Equal(t, SeverityWarning, p.Severity)
	assert.NotContains(t, render(problems), "literal-secret")
}
