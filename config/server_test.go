package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serverYAML builds a config with a valid server "good" and the server "bad" given as
// indented lines, so every case also proves the error stays with its server.
func serverYAML(bad string) string {
	return "version: 1\nservers:\n  good:\n    command: npx\n  bad:\n" + bad
}

func TestServerLevelErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		env   map[string]string
		field string
		line  int
		want  []string // message parts: what is wrong and how to fix it
	}{
		{"unknown transport", "    transport: websocket\n    url: wss://x/ws\n", nil, "transport", 6,
			[]string{`"websocket" is not supported`, "stdio, streamable_http (alias http) or sse"}},
		{"stdio without command", "    transport: stdio\n", nil, "command", 5,
			[]string{"required for stdio transport; set command to the program that starts the server"}},
		{"http without url", "    transport: streamable_http\n", nil, "url", 5,
			[]string{"required for streamable_http transport; set url"}},
		{"sse without url", "    transport: sse\n", nil, "url", 5, []string{"required for sse transport"}},
		{"missing host variable via env ref", "    command: npx\n    env:\n      TOKEN: {env: GITHUB_TOKEN}\n", nil, "env.TOKEN", 8,
			[]string{"host variable GITHUB_TOKEN is not set; export it or add it to an env_file"}},
		{"missing variable in header", "    url: https://x/mcp\n    headers:\n      Authorization: {env: MCP_AUTH}\n", nil, "headers.Authorization", 8,
			[]string{"host variable MCP_AUTH is not set"}},
		{"missing variable via interpolation", "    url: 'https://${API_HOST}/mcp'\n", nil, "url", 6,
			[]string{"variable API_HOST (in ${API_HOST}) is not set", "export it", "${API_HOST:-value}"}},
		{"missing variable in args", "    command: npx\n    args: ['--dir=${DATA_DIR}']\n", nil, "args[0]", 7,
			[]string{"variable DATA_DIR"}},
		{"unterminated reference", "    command: 'run ${HOME'\n", nil, "command", 6, []string{"no closing }", "$$"}},
		{"http to a remote host", "    url: http://example.com/mcp\n", nil, "url", 6,
			[]string{"plain http://", "use https://, or set insecure: true"}},
		{"http to a remote IP", "    url: http://10.0.0.1/mcp\n", nil, "url", 6, []string{"plain http://"}},
		{"url with another scheme", "    transport: sse\n    url: ftp://example.com/x\n", nil, "url", 7, []string{"http:// or https://"}},
		{"url without host", "    url: https:///mcp\n", nil, "url", 6, []string{"with a host"}},
		{"bad duration", "    command: npx\n    request_timeout: soon\n", nil, "request_timeout", 7,
			[]string{`"soon" is not a valid duration`, "Go syntax (30s, 2m", "ISO 8601"}},
		{"negative duration", "    command: npx\n    connect_timeout: -5s\n", nil, "connect_timeout", 7, []string{"negative duration"}},
		{"zero timeout", "    command: npx\n    connect_timeout: 0\n", nil, "connect_timeout", 7, []string{"greater than zero"}},
		{"bad tool timeout", "    command: npx\n    tools:\n      config:\n        t: {timeout: P1M}\n", nil, "tools.config.t.timeout", 9,
			[]string{"years and months have no fixed length"}},
		{"bad max_instances", "    command: npx\n    lease:\n      max_instances: lots\n", nil, "lease.max_instances", 8,
			[]string{"non-negative whole number"}},
		{"negative prewarm", "    command: npx\n    lease:\n      prewarm: -1\n", nil, "lease.prewarm", 8, []string{"use 0 or more"}},
		{"unknown transform", "    command: npx\n    transform:\n      - rename: x\n", nil, "transform[0]", 8,
			[]string{`unknown transform "rename"`, "prefix: 'name_'", "prefix: {remove: 'old_', add: 'new_'}", "suffix: '_name'"}},
		{"transform with two keys", "    command: npx\n    transform:\n      - {prefix: a, suffix: b}\n", nil, "transform[0]", 8,
			[]string{"exactly one key"}},
		{"unknown tools mode", "    command: npx\n    tools:\n      mode: permissive\n", nil, "tools.mode", 8,
			[]string{`"permissive" is not a mode`, "dynamic", "strict"}},
		{"bad protocol", "    command: npx\n    protocol: latest\n", nil, "protocol", 7,
			[]string{"use auto or a dated MCP version such as 2025-11-25"}},
		{"bad boolean", "    command: npx\n    required: sometimes\n", nil, "required", 7, []string{"use true or false"}},
		{"args not a list", "    command: npx\n    args: -y\n", nil, "args", 7, []string{"must be a list"}},
		{"env value is a list", "    command: npx\n    env:\n      A: [1]\n", nil, "env.A", 8, []string{"must be a single value"}},
		{"env mapping without env key", "    command: npx\n    env:\n      A: {from: B}\n", nil, "env.A", 8, []string{"{env: HOST_VAR}"}},
		{"header with line break", "    url: https://x/mcp\n    headers:\n      X-A: \"a\\nb\"\n", nil, "headers.X-A", 8, []string{"line break"}},
		{"missing env_file", "    command: npx\n    env_file: missing.env\n", nil, "env_file", 7,
			[]string{`"missing.env" does not exist`, "relative to the config file's directory"}},
		{"server that is not a mapping", "    npx\n", nil, "", 6, []string{"add command:"}},
		{"duplicate key in server", "    command: npx\n    command: uvx\n", nil, "command", 7, []string{"keep one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, problems := loadYAML(t, serverYAML(tt.body), tt.env)
			require.NotNil(t, ws, "per-server errors keep the workspace: %s", render(problems))
			assert.Equal(t, []string{"bad"}, ws.Rejected)
			require.Len(t, ws.Servers, 1)
			assert.Equal(t, "good", ws.Servers[0].ID)
			assert.Nil(t, ws.Server("bad"))

			p := problemAt(t, problems, tt.field)
			assert.Equal(t, SeverityError, p.Severity)
			assert.Equal(t, "bad", p.Server)
			assert.Equal(t, tt.line, p.Line)
			for _, want := range tt.want {
				assert.Contains(t, p.Message, want)
			}
		})
	}
}

func TestServerIDRules(t *testing.T) {
	for _, id := range []string{"'has space'", "'slash/id'", strings.Repeat("a", 65), "''"} {
		ws, problems := loadYAML(t, fmt.Sprintf("version: 1\nservers:\n  %s:\n    command: npx\n", id), nil)
		require.NotNil(t, ws, id)
		assert.Empty(t, ws.Servers, id)
		p := problemAt(t, problems, "")
		assert.Equal(t, SeverityError, p.Severity)
		assert.Contains(t, p.Message, "rename it")
	}
	ws, problems := loadYAML(t, "version: 1\nservers:\n  my.server_v2-x:\n    command: npx\n", nil)
	require.Empty(t, problems)
	assert.NotNil(t, ws.Server("my.server_v2-x"))
}

func TestAllowedCommands(t *testing.T) {
	base := "version: 1\nsecurity:\n  allowed_commands: [npx, uvx, docker]\nservers:\n  s:\n    command: %s\n"
	for _, cmd := range []string{"npx", "/usr/local/bin/uvx", "docker"} {
		ws, problems := loadYAML(t, fmt.Sprintf(base, cmd), nil)
		require.Empty(t, problems, cmd)
		assert.NotNil(t, ws.Server("s"), cmd)
	}
	ws, problems := loadYAML(t, fmt.Sprintf(base, "python"), nil)
	require.NotNil(t, ws)
	assert.Equal(t, []string{"s"}, ws.Rejected)
	p := problemAt(t, problems, "command")
	assert.Equal(t, 6, p.Line)
	assert.Contains(t, p.Message, `"python" is not allowed; security.allowed_commands permits: npx, uvx, docker`)
}

func TestURLRulesAccepted(t *testing.T) {
	for _, body := range []string{
		"url: http://localhost:3000/mcp",
		"url: http://LOCALHOST/mcp",
		"url: http://127.0.0.1:3000/mcp",
		"url: http://127.8.9.10/mcp",
		"url: 'http://[::1]:3000/mcp'",
		"url: https://example.com/mcp",
		"url: HTTPS://example.com/mcp",
		"{url: 'http://example.com/mcp', insecure: true}",
	} {
		text := "version: 1\nservers:\n  s:\n    " + body + "\n"
		if strings.HasPrefix(body, "{") {
			text = "version: 1\nservers:\n  s: " + body + "\n"
		}
		ws, problems := loadYAML(t, text, nil)
		require.NotNil(t, ws, body)
		assert.Empty(t, problems, body)
		require.NotNil(t, ws.Server("s"), body)
		assert.Equal(t, TransportHTTP, ws.Server("s").Transport, "a url alone means streamable_http")
	}
}

func TestServerWarnings(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		field string
		line  int
		want  string
	}{
		{"misspelled key", "    command: npx\n    transprot: stdio\n", "transprot", 5, `did you mean "transport"?`},
		{"underscore for hyphen", "    command: npx\n    truely_stateless: true\n", "truely_stateless", 5, `did you mean "truely-stateless"?`},
		{"unknown tools key", "    command: npx\n    tools:\n      whitlist: [a]\n", "tools.whitlist", 6, `did you mean "whitelist"?`},
		{"unknown tool setting", "    command: npx\n    tools:\n      defaults: {timeout: 1s, retries: 3}\n", "tools.defaults.retries", 6, "unknown key"},
		{"url on stdio", "    command: npx\n    url: https://x/mcp\n", "url", 5, "does not apply to the stdio transport"},
		{"env on http", "    url: https://x/mcp\n    env: {A: b}\n", "env", 5, "does not apply to the streamable_http transport"},
		{"lease on a stateless server", "    command: npx\n    truely-stateless: true\n    lease: {idle_ttl: 1m}\n", "lease", 6, "applies only when truely-stateless is false"},
		{"prewarm above max", "    command: npx\n    lease: {max_instances: 1, prewarm: 2}\n", "lease.prewarm", 5, "lower prewarm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := "version: 1\nservers:\n  s:\n" + tt.body
			ws, problems := loadYAML(t, text, nil)
			require.NotNil(t, ws)
			require.NotNil(t, ws.Server("s"), "warnings do not reject: %s", render(problems))
			p := problemAt(t, problems, tt.field)
			assert.Equal(t, SeverityWarning, p.Severity)
			assert.Equal(t, "s", p.Server)
			assert.Equal(t, tt.line, p.Line)
			assert.Contains(t, p.Message, tt.want)
		})
	}
}

func TestEnvFileRelativeToConfigDir(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"conf/mcp.yaml": "version: 1\nservers:\n  s:\n    command: npx\n    env_file: secrets/.env\n    cwd: ..\n" +
			"    env:\n      TOKEN: {env: TOKEN}\n      URL: 'https://${HOST}/x'\n      PLAIN: '${ONLY_HOST}'\n",
		"conf/secrets/.env": "TOKEN=from-file\nexport HOST='file.example'\n",
	})
	// Run from elsewhere: paths must resolve against the config file, not the process.
	t.Chdir(t.TempDir())
	ws, problems := Load([]string{filepath.Join(dir, "conf/mcp.yaml")}, envOf(map[string]string{"TOKEN": "from-host", "ONLY_HOST": "h"}))
	require.NotNil(t, ws)
	require.Empty(t, problems, render(problems))
	s := ws.Server("s")
	require.NotNil(t, s)
	assert.Equal(t, map[string]string{"TOKEN": "from-file", "URL": "https://file.example/x", "PLAIN": "h"}, s.Env)
	assert.Equal(t, dir, s.Cwd)
}

func TestEnvFileBadLinesWarn(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"mcp.yaml": "version: 1\nservers:\n  s:\n    command: npx\n    env_file: .env\n",
		".env":     "GOOD=1\nthis line is wrong\n",
	})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, nil)
	require.NotNil(t, ws.Server("s"))
	p := problemAt(t, problems, "env_file")
	assert.Equal(t, SeverityWarning, p.Severity)
	assert.Contains(t, p.Message, `line 2 of ".env" is not KEY=VALUE`)
}

func TestEnvFileMustBeRegular(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"mcp.yaml":    "version: 1\nservers:\n  s:\n    command: npx\n    env_file: sub\n",
		"sub/ignored": "",
	})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, nil)
	assert.Equal(t, []string{"s"}, ws.Rejected)
	assert.Contains(t, problemAt(t, problems, "env_file").Message, "not a regular file")
}

func TestInterpolationEverywhere(t *testing.T) {
	text := `version: 1
servers:
  s:
    command: '${BIN}'
    args: ['--root=${ROOT}', 'cost=$$5']
    cwd: '${ROOT}'
    env: {A: '${A:-dflt}'}
    request_timeout: '${TIMEOUT}'
    tools:
      whitelist: ['${PREFIX}*']
    transform:
      - prefix: '${PREFIX}'
`
	root := t.TempDir() // cwd must exist
	env := map[string]string{"BIN": "node", "ROOT": root, "TIMEOUT": "5s", "PREFIX": "x_", "A": ""}
	ws, problems := loadYAML(t, text, env)
	require.Empty(t, problems, render(problems))
	s := ws.Server("s")
	assert.Equal(t, "node", s.Command)
	assert.Equal(t, []string{"--root=" + root, "cost=$5"}, s.Args)
	assert.Equal(t, root, s.Cwd)
	assert.Equal(t, map[string]string{"A": "dflt"}, s.Env, ":- applies to empty values too")
	assert.Equal(t, "5s", s.RequestTimeout.String())
	assert.Equal(t, []string{"x_*"}, s.Tools.Whitelist)
	assert.Equal(t, "x_", s.Transforms[0].Add)
}
