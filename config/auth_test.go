package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const accessServers = `
servers:
  github: { command: gh-mcp }
  fs: { command: fs-mcp }
`

func TestAuthAndProfilesLoad(t *testing.T) {
	ws, problems := loadYAML(t, `version: 1
http:
  auth:
    tokens:
      ci-bot: { env: CI_BOT_TOKEN }
      laptop: { env: LAPTOP_TOKEN }
    oauth:
      issuer: https://auth.example.com
      audience: https://gateway.example.com/mcp
      required_scopes: [mcp, mcp]
profiles:
  ci-bot: { servers: [github], tools: ['github_*'] }
  laptop: {}
`+accessServers, map[string]string{"CI_BOT_TOKEN": "ci-secret-0123456789", "LAPTOP_TOKEN": "laptop-secret-0123456789"})
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, problems)
	assert.Equal(t, map[string]string{"ci-bot": "ci-secret-0123456789", "laptop": "laptop-secret-0123456789"}, ws.HTTP.Auth.Tokens)
	assert.Equal(t, &OAuth{Issuer: "https://auth.example.com", Audience: "https://gateway.example.com/mcp", RequiredScopes: []string{"mcp"}}, ws.HTTP.Auth.OAuth)
	assert.Equal(t, map[string]Profile{"ci-bot": {Servers: []string{"github"}, Tools: []string{"github_*"}}, "laptop": {}}, ws.Profiles)
	assert.True(t, ws.HTTP.Auth.Enabled())
	assert.Contains(t, ws.Secrets(), "ci-secret-0123456789", "tokens are scrubbed from logs")
}

func TestAuthProblems(t *testing.T) {
	env := map[string]string{"EMPTY": "", "SHORT": "abc", "GOOD": "0123456789abcdef0123", "SPACED": "a b c d e f g h i j k l", "PUNCT": "p@ss!word#0123456789"}
	tests := []struct {
		name, yaml string
		field      string
		severity   Severity
		contains   string
	}{
		{"empty token", "http: {auth: {tokens: {bot: {env: EMPTY}}}}", "http.auth.tokens.bot", SeverityError, "token is empty"},
		{"unset variable", "http: {auth: {tokens: {bot: {env: NOPE}}}}", "http.auth.tokens.bot", SeverityError, "NOPE is not set"},
		{"short token", "http: {auth: {tokens: {bot: {env: SHORT}}}}", "http.auth.tokens.bot", SeverityWarning, "easy to guess"},
		{"white space", "http: {auth: {tokens: {bot: {env: SPACED}}}}", "http.auth.tokens.bot", SeverityError, "white space"},
		{"token a client cannot send", "http: {auth: {tokens: {bot: {env: PUNCT}}}}", "http.auth.tokens.bot", SeverityError, "cannot carry"},
		{"literal token", "http: {auth: {tokens: {bot: literal-token-0123456789}}}", "http.auth.tokens.bot", SeverityWarning, "written in the config file"},
		{"bad client name", "http: {auth: {tokens: {'a b': {env: GOOD}}}}", "http.auth.tokens.a b", SeverityError, "not a client name"},
		{"same token twice", "http: {auth: {tokens: {a: {env: GOOD}, b: {env: GOOD}}}}", "http.auth.tokens.b", SeverityError, "same token as client \"a\""},
		{"empty auth", "http: {auth: {}}", "http.auth", SeverityError, "neither a token nor oauth"},
		{"no tokens", "http: {auth: {tokens: {}}}", "http.auth", SeverityError, "neither a token nor oauth"},
		{"oauth without issuer", "http: {auth: {oauth: {audience: x}}}", "http.auth.oauth.issuer", SeverityError, "required"},
		{"oauth without audience", "http: {auth: {oauth: {issuer: 'https://a.example'}}}", "http.auth.oauth.audience", SeverityError, "required"},
		{"oauth plain http", "http: {auth: {oauth: {issuer: 'http://a.example', audience: x}}}", "http.auth.oauth.issuer", SeverityError, "plain http"},
		{"oauth bad scope", "http: {auth: {oauth: {issuer: 'https://a.example', audience: x, required_scopes: ['a b']}}}", "http.auth.oauth.required_scopes[0]", SeverityError, "not a scope"},
		{"unknown oauth key", "http: {auth: {oauth: {issuer: 'https://a.example', audience: x, audiance: y}}}", "http.auth.oauth.audiance", SeverityWarning, "did you mean \"audience\""},
		{"unknown server", "http: {auth: {tokens: {bot: {env: GOOD}}}}\nprofiles: {bot: {servers: [githb]}}", "profiles.bot.servers[0]", SeverityError, "did you mean \"github\""},
		{"empty pattern", "http: {auth: {tokens: {bot: {env: GOOD}}}}\nprofiles: {bot: {tools: ['']}}", "profiles.bot.tools[0]", SeverityError, "empty pattern"},
		{"empty servers list", "http: {auth: {tokens: {bot: {env: GOOD}}}}\nprofiles: {bot: {servers: []}}", "profiles.bot.servers", SeverityWarning, "restricts nothing"},
		{"empty tools list", "http: {auth: {tokens: {bot: {env: GOOD}}}}\nprofiles: {bot: {tools: []}}", "profiles.bot.tools", SeverityWarning, "restricts nothing"},
		{"profile without auth", "profiles: {bot: {servers: [github]}}", "profiles.bot", SeverityWarning, "http.auth is not set"},
		{"profile of no client", "http: {auth: {tokens: {bot: {env: GOOD}}}}\nprofiles: {robot: {servers: [github]}}", "profiles.robot", SeverityWarning, "never applies"},
		{"match of a subject and a claim", oauthAuth + "\nprofiles: {admins: {match: {subject: alice, claim: groups, value: admins}}}", "profiles.admins.match", SeverityError, "matches one way"},
		{"claim without value", oauthAuth + "\nprofiles: {admins: {match: {claim: groups}}}", "profiles.admins.match", SeverityError, "needs both claim and value"},
		{"empty match", oauthAuth + "\nprofiles: {admins: {match: {}}}", "profiles.admins.match", SeverityError, "matches nothing"},
		{"empty subject", oauthAuth + "\nprofiles: {admins: {match: {subject: ''}}}", "profiles.admins.match.subject", SeverityError, "is empty"},
		{"unknown match key", oauthAuth + "\nprofiles: {admins: {match: {subject: a, group: b}}}", "profiles.admins.match.group", SeverityWarning, "unknown key"},
		{"match without oauth", "http: {auth: {tokens: {bot: {env: GOOD}}}}\nprofiles: {admins: {match: {subject: alice}}}", "profiles.admins.match", SeverityWarning, "http.auth.oauth is not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, problems := loadYAML(t, "version: 1\n"+tc.yaml+accessServers, env)
			p := problemAt(t, problems, tc.field)
			assert.Equal(t, tc.severity, p.Severity, p.String())
			assert.Contains(t, p.String(), tc.contains)
			assert.Greater(t, p.Line, 0, "the problem points at a line: %s", p)
			if tc.severity == SeverityError {
				assert.Nil(t, ws, "a bad http.auth or profile voids the config, so a reload keeps the last good one")
			}
			for _, secret := range env {
				if len(secret) > 3 {
					assert.NotContains(t, render(problems), secret, "no token in a problem")
				}
			}
		})
	}
}

// oauthAuth is an http.auth with OAuth, for profiles with a match.
const oauthAuth = "http: {auth: {oauth: {issuer: 'https://a.example', audience: x}}}"

// TestProfileMatchLoads: a profile with a match keeps it, and the line it
// is named on, which orders the profiles chosen by a claim.
func TestProfileMatchLoads(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\n"+oauthAuth+"\nprofiles:\n  admins: {match: {claim: groups, value: admins}, servers: [github]}\n  alice: {match: {subject: alice}}\n  web-app: {servers: [fs]}\n"+accessServers, nil)
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, problems, render(problems))
	assert.Equal(t, Profile{Servers: []string{"github"}, Match: ProfileMatch{Claim: "groups", Value: "admins"}, Line: 4}, ws.Profiles["admins"])
	assert.Equal(t, Profile{Match: ProfileMatch{Subject: "alice"}, Line: 5}, ws.Profiles["alice"])
	assert.Equal(t, Profile{Servers: []string{"fs"}}, ws.Profiles["web-app"], "a profile without a match is its client's")
}

func TestProfilesFollowLaterFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "version: 1\nprofiles: {bot: {servers: [github]}}\nhttp: {auth: {tokens: {bot: {env: GOOD}}}}\n" + accessServers,
		"b.yaml": "version: 1\nprofiles: {bot: {servers: [fs]}}\n",
	})
	ws, problems := Load([]string{dir + "/a.yaml", dir + "/b.yaml"}, envOf(map[string]string{"GOOD": "0123456789abcdef0123"}))
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, []string{"fs"}, ws.Profiles["bot"].Servers, "a later file's profiles replace the earlier ones")
	assert.Equal(t, "0123456789abcdef0123", ws.HTTP.Auth.Tokens["bot"], "auth of the earlier file stays")
}

// TestOperatorWhoseTokenIsUnset: an operator whose token's variable is not set is
// still a client of http.auth.tokens: the one problem is the unset variable.
func TestOperatorWhoseTokenIsUnset(t *testing.T) {
	_, problems := loadYAML(t, "version: 1\nhttp: {auth: {tokens: {ops: {env: NOPE}, bot: {env: GOOD}}, operators: [ops]}}"+accessServers,
		map[string]string{"GOOD": "0123456789abcdef0123"})
	text := render(problems)
	assert.Contains(t, text, "NOPE is not set")
	assert.NotContains(t, text, "is no client of http.auth.tokens")
	_, problems = loadYAML(t, "version: 1\nhttp: {auth: {tokens: {bot: {env: GOOD}}, operators: [opz]}}"+accessServers,
		map[string]string{"GOOD": "0123456789abcdef0123"})
	assert.Contains(t, render(problems), `"opz" is no client of http.auth.tokens`, "a name written nowhere is still an error")
}
