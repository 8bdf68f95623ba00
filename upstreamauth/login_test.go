package upstreamauth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

func TestLoginTarget(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	// What loading a config gives: its valid servers, and the problems of
	// those it rejected.
	oauthOf := func(perUser bool, service string) config.ServerAuth {
		return config.ServerAuth{Type: config.ServerAuthOAuth, PerUser: perUser, Service: service}
	}
	ws := &config.Workspace{Servers: []*config.Server{
		{ID: "plain", URL: "https://mcp.example.com/mcp"},
		{ID: "secured", URL: "https://mcp.example.com/other", Auth: oauthOf(false, "")},
		{ID: "apps", URL: "https://mcp.example.com/apps", Auth: oauthOf(true, "")},
		{ID: "both", URL: "https://mcp.example.com/both", Auth: oauthOf(true, config.ServiceLogin)},
	}, Rejected: []string{"broken"}}
	problems := []config.Problem{
		{Severity: config.SeverityError, Server: "broken", Field: "auth.type", Message: `"basic" is not supported; use oauth or token_exchange`},
		{Severity: config.SeverityWarning, Server: "plain", Message: "a warning of another server"},
	}
	for _, tc := range []struct {
		id, err, problem string
	}{
		{"secured", "", ""},
		{"both", "", ""},
		{"nope", `no server "nope" in the config (servers with auth: {type: oauth}: apps, both, secured)`, ""},
		{"plain", `server "plain" does not use OAuth; add auth: {type: oauth}`, ""},
		{"apps", `server "apps" keeps a login per caller (auth.per_user)`, ""},
		{"broken", `server "broken" cannot be used until the config problems above are fixed`, `"basic" is not supported`},
	} {
		t.Run(tc.id, func(t *testing.T) {
			srv, store, own, err := LoginTarget(ws, problems, tc.id)
			if tc.err == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.id, srv.ID)
				assert.NotNil(t, store)
				assert.Empty(t, own)
				return
			}
			assert.ErrorContains(t, err, tc.err)
			assert.Nil(t, srv)
			if tc.problem == "" {
				assert.Empty(t, own)
				return
			}
			require.Len(t, own, 1)
			assert.Equal(t, tc.id, own[0].Server)
			assert.Contains(t, own[0].Message, tc.problem)
		})
	}
	_, _, _, err := LoginTarget(nil, nil, "x")
	assert.EqualError(t, err, `no server "x" in the config (no server in the config has auth: {type: oauth})`)
}
