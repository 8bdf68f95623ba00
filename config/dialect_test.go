package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dialectEnv are the host variables the dialect fixtures refer to.
var dialectEnv = map[string]string{
	"BRAVE_API_KEY": "brave-key", "NOTES_API_KEY": "notes-key", "LINEAR_TOKEN": "linear-token",
	"API_KEY": "api-key", "CLOUD_API_KEY": "cloud-key", "PERPLEXITY_KEY": "perplexity-key", "HOME": "/home/u",
}

// serverView is what a test compares of a server.
type serverView struct {
	Transport Transport
	Command   string
	Args      []string
	Env       map[string]string
	URL       string
	Headers   map[string]string
}

func viewOf(s *Server) serverView {
	return serverView{s.Transport, s.Command, s.Args, s.Env, s.URL, s.Headers}
}

// TestDialectFixtures loads the config of every client format in testdata/dialects and
// checks the servers it maps to and the line each comes from.
func TestDialectFixtures(t *testing.T) {
	abs, err := filepath.Abs("testdata/dialects")
	require.NoError(t, err)
	tests := []struct {
		file    string
		dialect Dialect
		servers map[string]serverView
		lines   map[string]int
		warn    []string // parts of warnings expected, one string per warning
	}{
		{"claude_desktop.json", DialectMCPServers, map[string]serverView{
			"filesystem":   {TransportStdio, "npx", []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"}, nil, "", nil},
			"github":       {TransportStdio, "docker", []string{"run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"}, map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_exampleexampleexample"}, "", nil},
			"Brave-Search": {TransportStdio, "npx", []string{"-y", "@modelcontextprotocol/server-brave-search"}, map[string]string{"BRAVE_API_KEY": "brave-key"}, "", nil},
		}, map[string]int{"filesystem": 3, "github": 7, "Brave-Search": 14}, []string{`"Brave Search" is not a valid server id here`}},
		{"cursor_mcp.json", DialectMCPServers, map[string]serverView{
			"notes":  {TransportStdio, "uvx", []string{"notes-mcp", "--root", abs}, map[string]string{"API_KEY": "notes-key"}, "", nil},
			"linear": {TransportHTTP, "", nil, nil, "https://mcp.linear.app/mcp", map[string]string{"Authorization": "Bearer linear-token"}},
		}, map[string]int{"notes": 3, "linear": 9}, nil},
		{"claude_code.mcp.json", DialectMCPServers, map[string]serverView{
			"api":    {TransportHTTP, "", nil, nil, "https://api.example.com/mcp", map[string]string{"Authorization": "Bearer api-key"}},
			"events": {TransportSSE, "", nil, nil, "https://events.example.com/sse", nil},
			"local":  {TransportStdio, "/usr/local/bin/local-mcp", []string{"--verbose"}, map[string]string{"LOG_LEVEL": "debug"}, "", nil},
		}, map[string]int{"api": 3, "events": 8, "local": 12}, nil},
		{"gemini_settings.json", DialectMCPServers, map[string]serverView{
			"remote": {TransportHTTP, "", nil, nil, "https://mcp.example.com/mcp", map[string]string{"X-Team": "blue"}},
			"py":     {TransportStdio, "python", []string{"-m", "my_mcp_server"}, nil, "", nil},
		}, map[string]int{"remote": 4, "py": 10}, []string{"timeout, trust: settings of the client"}},
		{"vscode/.vscode/mcp.json", DialectVSCode, map[string]serverView{
			"perplexity": {TransportStdio, "npx", []string{"-y", "server-perplexity-ask"}, map[string]string{"PERPLEXITY_API_KEY": "perplexity-key"}, "", nil},
			"fetch":      {TransportStdio, "uvx", []string{"mcp-server-fetch", "--root", filepath.Join(abs, "vscode")}, nil, "", nil},
			"github":     {TransportHTTP, "", nil, nil, "https://api.githubcopilot.com/mcp/", nil},
			"legacy":     {TransportSSE, "", nil, nil, "http://localhost:3000/sse", nil},
		}, map[string]int{"perplexity": 7, "fetch": 14, "github": 21, "legacy": 25},
			[]string{"${input:perplexity-key}", "(Perplexity API Key)", "host variable PERPLEXITY_KEY", "dev: a setting of the client"}},
		{"tenex_mcp.json", DialectTENEX, map[string]serverView{
			"filesystem": {TransportStdio, "npx", []string{"-y", "@modelcontextprotocol/server-filesystem"}, nil, "", nil},
			"github":     {TransportStdio, "npx", []string{"-y", "@modelcontextprotocol/server-github"}, map[string]string{"GITHUB_TOKEN": "ghp_xxx"}, "", nil},
		}, map[string]int{"filesystem": 3, "github": 9}, []string{"allowedPaths"}},
		{"holodeck_agent.yaml", DialectHoloDeck, map[string]serverView{
			"filesystem": {TransportStdio, "npx", []string{"-y", "@modelcontextprotocol/server-filesystem"}, map[string]string{"ALLOWED_PATHS": "/workspace"}, "", nil},
			"cloud_api":  {TransportSSE, "", nil, nil, "https://api.example.com/mcp/sse", map[string]string{"Authorization": "Bearer cloud-key"}},
			"memory":     {TransportStdio, "npx", []string{"-y", "@modelcontextprotocol/server-memory"}, nil, "", nil},
		}, map[string]int{"filesystem": 11, "cloud_api": 20, "memory": 30},
			[]string{"sse_read_timeout: a HoloDeck setting", "no command: started as npx -y @modelcontextprotocol/server-memory"}},
		{"chatagent.yaml", DialectChatagent, map[string]serverView{
			"customers":      {TransportHTTP, "", nil, nil, "http://localhost:8180/mcp/http/mcp", nil},
			"internal-tools": {TransportHTTP, "", nil, nil, "http://localhost:8181/mcp/http/mcp", nil},
		}, map[string]int{"customers": 12, "internal-tools": 20}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata/dialects", tt.file)
			ws, problems := Load([]string{path}, envOf(dialectEnv))
			require.NotNil(t, ws, render(problems))
			require.Empty(t, ws.Rejected, render(problems))
			assert.Equal(t, []Source{{File: path, Dialect: tt.dialect, Servers: len(tt.servers)}}, ws.Sources)
			got := map[string]serverView{}
			for _, s := range ws.Servers {
				got[s.ID] = viewOf(s)
				assert.Equal(t, tt.lines[s.ID], s.Line, "line of server %s", s.ID)
				assert.Equal(t, path, s.File)
			}
			assert.Equal(t, tt.servers, got)
			text := render(problems)
			for _, want := range tt.warn {
				assert.Contains(t, text, want)
			}
			if len(tt.warn) == 0 {
				assert.Empty(t, problems)
			}
			for _, p := range problems {
				assert.Equal(t, SeverityWarning, p.Severity, p.String())
				assert.Positive(t, p.Line, p.String())
				assert.NotEmpty(t, p.Server, p.String())
			}
		})
	}
}

func TestDialectDetails(t *testing.T) {
	t.Run("vscode servers start in the workspace folder, and read its env file", func(t *testing.T) {
		ws, problems := Load([]string{"testdata/dialects/vscode/.vscode/mcp.json"}, envOf(dialectEnv))
		require.NotNil(t, ws, render(problems))
		abs, _ := filepath.Abs("testdata/dialects/vscode")
		assert.Equal(t, abs, ws.Server("perplexity").Cwd)
		assert.Equal(t, abs, ws.Server("fetch").Cwd)
	})
	t.Run("gemini: includeTools less excludeTools is the whitelist; cwd is relative to the file", func(t *testing.T) {
		ws, _ := Load([]string{"testdata/dialects/gemini_settings.json"}, envOf(dialectEnv))
		py := ws.Server("py")
		assert.Equal(t, []string{"safe_tool", "file_reader"}, py.Tools.Whitelist)
		assert.Empty(t, py.Tools.Blacklist)
		abs, _ := filepath.Abs("testdata/dialects/server")
		assert.Equal(t, abs, py.Cwd)
	})
	t.Run("holodeck timeouts", func(t *testing.T) {
		ws, _ := Load([]string{"testdata/dialects/holodeck_agent.yaml"}, envOf(dialectEnv))
		assert.Equal(t, 90*time.Second, ws.Server("filesystem").RequestTimeout)
		assert.Equal(t, 10*time.Second, ws.Server("cloud_api").ConnectTimeout)
	})
	t.Run("chatagent: toolbox limits, modes and per-tool config", func(t *testing.T) {
		ws, _ := Load([]string{"testdata/dialects/chatagent.yaml"}, envOf(dialectEnv))
		assert.Equal(t, 10, ws.Limits.MaxConcurrent)
		c := ws.Server("customers")
		assert.Equal(t, ModeDynamic, c.Tools.Mode)
		assert.Equal(t, ToolSettings{Timeout: 30 * time.Second, MaxInstances: 10}, c.Tools.Defaults)
		assert.Equal(t, ToolSettings{Timeout: time.Minute, MaxInstances: 50}, c.Tools.Config["get_customer"])
		assert.Equal(t, ModeStrict, ws.Server("internal-tools").Tools.Mode)
		assert.Equal(t, c.Tools.Config, ws.Server("internal-tools").Tools.Config)
	})
}

// TestDialectErrorsAtTheirLine: a mistake in a client's config is reported at its own
// line and field, in the client's terms, and rejects only its server.
func TestDialectErrorsAtTheirLine(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		text   string
		env    map[string]string
		line   int
		server string
		field  string
		want   string
		fatal  bool // the whole file is rejected
	}{
		{"mcpServers type unsupported", "mcp.json", "{\n  \"mcpServers\": {\n    \"ok\": {\"command\": \"npx\"},\n    \"ws\": {\n      \"type\": \"websocket\",\n      \"url\": \"wss://x/ws\"\n    }\n  }\n}\n",
			nil, 5, "ws", "type", `"websocket" is not supported`, false},
		{"mcpServers missing variable", "mcp.json", "{\"mcpServers\": {\n  \"gh\": {\n    \"command\": \"npx\",\n    \"env\": {\"TOKEN\": \"${GH_TOKEN}\"}\n  }\n}}\n",
			nil, 4, "gh", "env.TOKEN", "variable GH_TOKEN", false},
		{"mcpServers without command or url", "mcp.json", "{\"mcpServers\": {\n  \"empty\": {}\n}}\n", nil, 2, "empty", "command", "required", false},
		{"vscode input that is not set", ".vscode/mcp.json", "{\n\"inputs\": [],\n\"servers\": {\n  \"p\": {\"type\": \"stdio\", \"command\": \"npx\",\n    \"env\": {\"K\": \"${input:api-key}\"}}\n}}\n",
			nil, 5, "p", "env.K", "variable API_KEY", false},
		{"vscode plain http to a remote host", "mcp.json", "{\"servers\": {\n  \"r\": {\"type\": \"http\",\n   \"url\": \"http://example.com/mcp\"}}}\n",
			nil, 3, "r", "url", "insecure: true", false},
		{"holodeck bad transport", "agent.yaml", "tools:\n  - name: ws\n    type: mcp\n    transport: websocket\n    url: wss://x/ws\n",
			nil, 4, "ws", "transport", `"websocket" is not supported`, false},
		{"holodeck envFile missing", "agent.yaml", "tools:\n  - name: fs\n    type: mcp\n    command: npx\n    envFile: nope.env\n",
			nil, 5, "fs", "envFile", `"nope.env" does not exist`, false},
		{"holodeck tool without a name", "agent.yaml", "tools:\n  - type: mcp\n    command: npx\n", nil, 2, "", "tools[0].name", "needs a name", true},
		{"chatagent bad mode", "chat.yaml", "mcps:\n  - name: c\n    url: https://x/mcp\n    mode: lenient\n", nil, 4, "c", "mode", `"lenient" is not a mode`, false},
		{"chatagent bad timeout", "chat.yaml", "toolbox:\n  mcps:\n    - name: c\n      url: https://x/mcp\n      mode: dynamic\n      default_tool_config:\n        timeout: soon\n",
			nil, 7, "c", "default_tool_config.timeout", `"soon" is not a valid duration`, false},
		{"invalid JSON", "mcp.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"npx\"}\n    \"b\": {}\n  }\n}\n", nil, 4, "", "", "invalid JSON", true},
		{"truncated JSON", "mcp.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"npx\"}\n", nil, 4, "", "", "ends before it is complete", true},
		{"unknown shape", "settings.json", "{\n  \"theme\": \"dark\",\n  \"fontSize\": 12\n}\n", nil, 1, "", "", "not a config mcp-aggregator can read (its top-level keys are fontSize, theme)", true},
		{"unknown YAML shape", "x.yaml", "name: agent\nmodel: gpt\n", nil, 1, "", "", "mcpServers (Claude Desktop", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{tt.file: tt.text})
			ws, problems := Load([]string{filepath.Join(dir, tt.file)}, envOf(tt.env))
			var found *Problem
			for i, p := range problems {
				if p.Severity == SeverityError && strings.Contains(p.Message, tt.want) {
					found = &problems[i]
				}
			}
			require.NotNil(t, found, "no error containing %q in:\n%s", tt.want, render(problems))
			assert.Equal(t, tt.line, found.Line, found.String())
			assert.Equal(t, tt.server, found.Server)
			assert.Equal(t, tt.field, found.Field)
			assert.Equal(t, filepath.Join(dir, tt.file), found.File)
			if tt.fatal {
				assert.Nil(t, ws)
				return
			}
			require.NotNil(t, ws)
			assert.Equal(t, []string{tt.server}, ws.Rejected)
		})
	}
}

func TestDialectDetection(t *testing.T) {
	tests := []struct {
		name string
		text string
		want Dialect
	}{
		{"native YAML", "version: 1\nservers: {}\n", DialectNative},
		{"native JSON", `{"version": 1, "servers": {}}`, DialectNative},
		{"mcpServers with a version added", `{"version": 1, "mcpServers": {"a": {"command": "x"}}}`, DialectMCPServers},
		{"mcpServers in YAML", "mcpServers:\n  a: {command: x}\n", DialectMCPServers},
		{"vscode typed servers", `{"servers": {"a": {"type": "stdio", "command": "x"}}}`, DialectVSCode},
		{"vscode inputs", `{"inputs": [], "servers": {}}`, DialectVSCode},
		{"vscode settings.json", `{"editor.fontSize": 12, "mcp": {"servers": {"a": {"command": "x"}}}}`, DialectVSCode},
		{"tenex", `{"servers": {"a": {"command": "x"}}, "enabled": true}`, DialectTENEX},
		{"holodeck", "tools:\n  - {name: a, type: mcp, command: x}\n", DialectHoloDeck},
		{"chatagent top level", "mcps:\n  - {name: a, url: 'https://x'}\n", DialectChatagent},
		{"chatagent nested", "myai:\n  toolbox:\n    mcps: []\n", DialectChatagent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, problems := loadYAML(t, tt.text, nil)
			require.NotNil(t, ws, render(problems))
			require.Len(t, ws.Sources, 1)
			assert.Equal(t, tt.want, ws.Sources[0].Dialect)
		})
	}
}

func TestDialectQuirks(t *testing.T) {
	t.Run("disabled servers are left out", func(t *testing.T) {
		ws, problems := loadYAML(t, `{"mcpServers": {"on": {"command": "x"}, "off": {"command": "y", "disabled": true}}}`, nil)
		require.NotNil(t, ws)
		assert.Empty(t, problems)
		assert.Len(t, ws.Servers, 1)
		assert.Equal(t, "on", ws.Servers[0].ID)
	})
	t.Run("tenex enabled false starts nothing", func(t *testing.T) {
		ws, problems := loadYAML(t, `{"servers": {"a": {"command": "x"}}, "enabled": false}`, nil)
		require.NotNil(t, ws)
		assert.Empty(t, ws.Servers)
		assert.Contains(t, render(problems), "enabled is false")
	})
	t.Run("unknown keys are warned about with a suggestion", func(t *testing.T) {
		ws, problems := loadYAML(t, "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"argz\": []}}}", nil)
		require.NotNil(t, ws)
		p := problemAt(t, problems, "argz")
		assert.Contains(t, p.Message, `did you mean "args"?`)
	})
	t.Run("the same name twice after cleaning gets a suffix", func(t *testing.T) {
		ws, _ := loadYAML(t, `{"mcpServers": {"my server": {"command": "x"}, "my-server": {"command": "y"}}}`, nil)
		require.NotNil(t, ws)
		var ids []string
		for _, s := range ws.Servers {
			ids = append(ids, s.ID)
		}
		assert.Equal(t, []string{"my-server-2", "my-server"}, ids, "the valid name keeps its id")
	})
	t.Run("names that clean to one id take the free suffixes in order, around the valid names", func(t *testing.T) {
		ws, problems := loadYAML(t, `{"mcpServers": {"my server": {"command": "a"}, "my-server-3": {"command": "b"}, "my+server": {"command": "c"},
			"my/server": {"command": "d"}, "my-server": {"command": "e"}, "my server": {"command": "f"}}}`, nil)
		require.Nil(t, ws, "a name written twice is an error")
		assert.Contains(t, render(problems), `server id "my-server-2" is already defined on line 1`)
		ws, problems = loadYAML(t, `{"mcpServers": {"my server": {"command": "a"}, "my-server-3": {"command": "b"}, "my+server": {"command": "c"},
			"my/server": {"command": "d"}, "my-server": {"command": "e"}}}`, nil)
		require.NotNil(t, ws, render(problems))
		ids := map[string]string{}
		for _, s := range ws.Servers {
			ids[s.Command] = s.ID
		}
		assert.Equal(t, map[string]string{"a": "my-server-2", "b": "my-server-3", "c": "my-server-4", "d": "my-server-5", "e": "my-server"}, ids, "valid names keep their ids")
	})
	t.Run("JSONC comments, trailing commas and escaped slashes", func(t *testing.T) {
		ws, problems := loadYAML(t, "{\n // c\n \"mcpServers\": {\"a\": {\"command\": \"\\/bin\\/x\", /* c */ \"args\": [\"1\",],},},\n}\n", nil)
		require.NotNil(t, ws, render(problems))
		assert.Equal(t, "/bin/x", ws.Servers[0].Command)
		assert.Equal(t, []string{"1"}, ws.Servers[0].Args)
	})
	t.Run("a YAML error is reported where it is", func(t *testing.T) {
		_, problems := loadYAML(t, "version: 1\nservers:\n  a:\n    command: x\n   args: [y]\n", nil)
		require.Len(t, problems, 1)
		assert.Equal(t, 5, problems[0].Line, problems[0].String())
		assert.Contains(t, problems[0].Message, "invalid YAML: did not find expected key")
	})
	t.Run("native field names stay native", func(t *testing.T) {
		_, problems := loadYAML(t, "version: 1\nservers:\n  a:\n    command: x\n    env_file: nope.env\n", nil)
		assert.Equal(t, 5, problemAt(t, problems, "env_file").Line)
	})
}

func TestInheritEnv(t *testing.T) {
	ws, problems := loadYAML(t, `version: 1
servers:
  all: {command: x, inherit_env: true}
  none: {command: x, inherit_env: false}
  some: {command: x, inherit_env: [AWS_*, KUBECONFIG]}
  bad: {command: x, inherit_env: [AWS-KEY]}
  remote: {url: 'https://x/mcp', inherit_env: true}
`, nil)
	require.NotNil(t, ws)
	assert.Equal(t, []string{"*"}, ws.Server("all").InheritEnv)
	assert.Empty(t, ws.Server("none").InheritEnv)
	assert.Equal(t, []string{"AWS_*", "KUBECONFIG"}, ws.Server("some").InheritEnv)
	assert.Equal(t, []string{"bad"}, ws.Rejected)
	assert.Contains(t, render(problems), `"AWS-KEY" is not a variable name or pattern`)
	assert.Contains(t, render(problems), `server "remote": inherit_env: does not apply to the streamable_http transport`)
	assert.NotEqual(t, ws.Server("all").Hash, ws.Server("none").Hash)
}

func TestLeaseReminderNeedsAdminTools(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nadmin: {enabled: false}\nservers:\n  a: {command: x}\n  b: {command: x, lease_reminder: true}\n", nil)
	require.NotNil(t, ws)
	assert.False(t, ws.Server("a").LeaseReminder, "no reminder to call mcp_release when it is not exported")
	assert.False(t, ws.Server("b").LeaseReminder)
	assert.Equal(t, SeverityWarning, problemAt(t, problems, "lease_reminder").Severity)
}

func TestWorkspaceSecrets(t *testing.T) {
	ws, problems := loadYAML(t, `version: 1
servers:
  a: {command: x, env: {TOKEN: {env: HOST_SECRET}, MODE: fast}}
  r: {url: 'https://user:pa55word@example.com/mcp?key=k3y-value', headers: {Authorization: 'Bearer abc'}}
`, map[string]string{"HOST_SECRET": "host-secret-value"})
	require.NotNil(t, ws, render(problems))
	secrets := ws.Secrets()
	for _, want := range []string{"host-secret-value", "fast", "Bearer abc", "user:pa55word", "pa55word", "key=k3y-value", "k3y-value"} {
		assert.Contains(t, secrets, want)
	}
}

func TestDialectDuplicateNames(t *testing.T) {
	ws, problems := loadYAML(t, "{\"mcpServers\": {\n\"a\": {\"command\": \"x\"},\n\"a\": {\"command\": \"y\"}}}\n", nil)
	assert.Nil(t, ws)
	p := problemAt(t, problems, "servers.a")
	assert.Equal(t, 3, p.Line)
	assert.Contains(t, p.Message, "already defined on line 2")

	_, problems = loadYAML(t, "mcps:\n  - {name: a, url: 'https://x'}\n  - {name: a, url: 'https://y'}\n", nil)
	assert.Contains(t, render(problems), "already defined on line 2")
}
