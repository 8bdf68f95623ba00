package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPrincipalHeadersRead(t *testing.T) {
	ws := loadValid(t, `version: 1
servers:
  crm:
    url: https://crm.example.com/mcp
    headers:
      X-User-Id: {principal: subject}
      X-Client: {principal: client}
      X-Issuer: {principal: issuer}
      X-Email: {principal: claim:email}
      X-Team: {principal: "claim:https://example.com/team"}
      X-Static: fixed
`, nil)
	srv := ws.Servers[0]
	assert.Equal(t, map[string]string{"X-User-Id": "subject", "X-Client": "client", "X-Issuer": "issuer",
		"X-Email": "claim:email", "X-Team": "claim:https://example.com/team"}, srv.PrincipalHeaders)
	assert.Equal(t, map[string]string{"X-Static": "fixed"}, srv.Headers)
}

func TestPrincipalHeadersProblems(t *testing.T) {
	tests := []struct {
		name, headers, field, want string
		stdio                      bool
		warning                    bool
	}{
		{name: "unknown part", headers: "{X-User: {principal: email}}", field: "headers.X-User", want: "subject, client, issuer or claim:NAME"},
		{name: "empty claim", headers: "{X-User: {principal: 'claim:'}}", field: "headers.X-User", want: "claim:NAME"},
		{name: "not a scalar", headers: "{X-User: {principal: [subject]}}", field: "headers.X-User", want: "e.g. {principal: subject}"},
		{name: "twice", headers: "{X-User: {principal: subject}, X-User: x}", field: "headers.X-User", want: "more than once"},
		{name: "Authorization beside auth", headers: "{Authorization: {principal: subject}}\n    auth: {type: oauth}", field: "auth", want: "headers.Authorization"},
		{name: "stdio server", headers: "{X-User: {principal: subject}}", field: "headers", want: "does not apply to the stdio transport", stdio: true, warning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := loadYAML(t, oneServerYAML(tt.stdio, "    headers: "+tt.headers+"\n"), nil)
			p := problemAt(t, problems, tt.field)
			want := SeverityError
			if tt.warning {
				want = SeverityWarning
			}
			assert.Equal(t, want, p.Severity)
			assert.Contains(t, p.Message, tt.want)
			assert.Greater(t, p.Line, 3, "the problem names the line")
			assert.NotEmpty(t, p.File)
		})
	}
}
