package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEnvironmentErrors: an error that setting a variable (or creating the
// env_file that sets it) clears is marked Environment, wherever the config
// reads the variable; every other error is not, so that `import` can tell a
// config that waits for its secrets from one that cannot run.
func TestEnvironmentErrors(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		field string
		env   bool
	}{
		{"${VAR} in a string", serverYAML("    command: npx\n    args: ['--dir=${DATA_DIR}']\n"), "args[0]", true},
		{"${VAR} in the url", serverYAML("    url: 'https://${API_HOST}/mcp'\n"), "url", true},
		{"{env: VAR}", serverYAML("    command: npx\n    env:\n      TOKEN: {env: GITHUB_TOKEN}\n"), "env.TOKEN", true},
		{"{env: VAR} in a header", serverYAML("    url: https://x/mcp\n    headers:\n      Authorization: {env: MCP_AUTH}\n"), "headers.Authorization", true},
		{"missing env_file", serverYAML("    command: npx\n    env_file: missing.env\n"), "env_file", true},
		{"gateway token {env: VAR}", "version: 1\nhttp: {auth: {tokens: {bot: {env: NOPE}}}}\nservers: {}\n", "http.auth.tokens.bot", true},
		{"gateway token ${VAR}", "version: 1\nhttp: {auth: {tokens: {bot: 'x${NOPE}'}}}\nservers: {}\n", "http.auth.tokens.bot", true},
		{"neither command nor url", serverYAML("    args: [x]\n"), "command", false},
		{"server that is not a mapping", serverYAML("    npx\n"), "", false},
		{"url that does not parse", serverYAML("    url: 'https://exa mple.com/mcp'\n"), "url", false},
		{"unterminated reference", serverYAML("    command: 'run ${HOME'\n"), "command", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := loadYAML(t, tt.text, nil)
			p := problemAt(t, problems, tt.field)
			assert.Equal(t, SeverityError, p.Severity, p.String())
			assert.Equal(t, tt.env, p.Environment, p.String())
		})
	}
}

// TestServerWithoutCommandOrURL: a server that says neither how to start it
// nor where it is is told both ways to fix it; one that chose stdio is told
// its command.
func TestServerWithoutCommandOrURL(t *testing.T) {
	_, problems := loadYAML(t, serverYAML("    args: [x]\n"), nil)
	p := problemAt(t, problems, "command")
	assert.Equal(t, "bad", p.Server)
	assert.Equal(t, 5, p.Line)
	assert.Equal(t, "required (or url: for a remote server); set command to the program that starts the server, or url to its endpoint, e.g. https://example.com/mcp", p.Message)

	_, problems = loadYAML(t, serverYAML("    transport: stdio\n"), nil)
	assert.Equal(t, "required for stdio transport; set command to the program that starts the server", problemAt(t, problems, "command").Message)
}
