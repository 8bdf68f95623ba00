package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuthOperators(t *testing.T) {
	env := map[string]string{"OPS_TOKEN": "0123456789abcdef-ops", "BOT_TOKEN": "0123456789abcdef-bot"}
	ws, problems := loadYAML(t, `version: 1
http:
  auth:
    tokens: {ops: {env: OPS_TOKEN}, bot: {env: BOT_TOKEN}}
    operators: [ops, ops]
`+accessServers, env)
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, problems)
	assert.Equal(t, []string{"ops"}, ws.HTTP.Auth.Operators)

	// With OAuth, an operator may be a client no static token names.
	ws, problems = loadYAML(t, `version: 1
http: {auth: {oauth: {issuer: 'https://auth.example.com', audience: x}, operators: [ops@example.com]}}
`+accessServers, env)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, []string{"ops@example.com"}, ws.HTTP.Auth.Operators)

	for _, tc := range []struct{ name, yaml, contains string }{
		{"no such client", "http: {auth: {tokens: {bot: {env: BOT_TOKEN}}, operators: [opps]}}", "no client of http.auth.tokens"},
		{"not a name", "http: {auth: {tokens: {bot: {env: BOT_TOKEN}}, operators: ['a b']}}", "not a client name"},
		{"empty", "http: {auth: {oauth: {issuer: 'https://auth.example.com', audience: x}, operators: ['  ']}}", "not a client name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, problems := loadYAML(t, "version: 1\n"+tc.yaml+accessServers, env)
			p := problemAt(t, problems, "http.auth.operators[0]")
			assert.Equal(t, SeverityError, p.Severity)
			assert.Contains(t, p.String(), tc.contains)
			assert.Nil(t, ws)
		})
	}
}
