package clientconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/configsource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNames(t *testing.T) {
	assert.Equal(t, []string{"claude-code", "claude-desktop", "codex", "cursor", "gemini", "inspector", "vscode"}, Names())
	for _, n := range Names() {
		c, ok := Lookup(n)
		require.True(t, ok, n)
		assert.NotEmpty(t, c.Where, n)
	}
	_, ok := Lookup("emacs")
	assert.False(t, ok)
}

func TestLaunchArgs(t *testing.T) {
	assert.Equal(t, []string{"serve"}, Launch{}.Args(), "the demo config: no --config")
	assert.Equal(t, []string{"serve", "--config", "/a.yaml", "--config", "/b c.json"}, Launch{Configs: []string{"/a.yaml", "/b c.json"}}.Args())
}

func TestSnippets(t *testing.T) {
	sep := string(filepath.ListSeparator)
	plain := Launch{Name: "mcp-aggregator", Command: "/usr/bin/mcp-aggregator", Configs: []string{"/etc/mcp.yaml", "/home/me/team.json"}}
	odd := Launch{Name: "my agg's", Command: "/opt/My Apps/mcp-aggregator", Configs: []string{`/tmp/a "b".yaml`}}
	demo := Launch{Name: "agg", Command: "/usr/bin/mcp-aggregator"}
	mcpServers := `{"mcpServers": {"mcp-aggregator": {"command": "/usr/bin/mcp-aggregator", "args": ["serve", "--config", "/etc/mcp.yaml", "--config", "/home/me/team.json"]}}}`
	tests := []struct {
		client string
		launch Launch
		json   string // the snippet as JSON, for the clients that read JSON
		text   string // the snippet as text, for the others
	}{
		{client: "claude-desktop", launch: plain, json: mcpServers},
		{client: "cursor", launch: plain, json: mcpServers},
		{client: "gemini", launch: plain, json: mcpServers},
		{client: "cursor", launch: demo, json: `{"mcpServers": {"agg": {"command": "/usr/bin/mcp-aggregator", "args": ["serve"]}}}`},
		{client: "vscode", launch: plain,
			json: `{"servers": {"mcp-aggregator": {"type": "stdio", "command": "/usr/bin/mcp-aggregator", "args": ["serve", "--config", "/etc/mcp.yaml", "--config", "/home/me/team.json"]}}}`},
		{client: "claude-desktop", launch: odd,
			json: `{"mcpServers": {"my agg's": {"command": "/opt/My Apps/mcp-aggregator", "args": ["serve", "--config", "/tmp/a \"b\".yaml"]}}}`},
		{client: "claude-code", launch: plain,
			text: "claude mcp add --scope user mcp-aggregator -- /usr/bin/mcp-aggregator serve --config /etc/mcp.yaml --config /home/me/team.json\n"},
		{client: "claude-code", launch: odd,
			text: `claude mcp add --scope user 'my agg'\''s' -- '/opt/My Apps/mcp-aggregator' serve --config '/tmp/a "b".yaml'` + "\n"},
		{client: "codex", launch: plain,
			text: "[mcp_servers.mcp-aggregator]\ncommand = \"/usr/bin/mcp-aggregator\"\nargs = [\"serve\", \"--config\", \"/etc/mcp.yaml\", \"--config\", \"/home/me/team.json\"]\n"},
		{client: "codex", launch: odd,
			text: "[mcp_servers.\"my agg's\"]\ncommand = \"/opt/My Apps/mcp-aggregator\"\nargs = [\"serve\", \"--config\", \"/tmp/a \\\"b\\\".yaml\"]\n"},
		{client: "inspector", launch: plain,
			text: "npx @modelcontextprotocol/inspector -e " + configsource.EnvVar + "=/etc/mcp.yaml" + sep + "/home/me/team.json /usr/bin/mcp-aggregator\n"},
		{client: "inspector", launch: demo,
			text: "npx @modelcontextprotocol/inspector /usr/bin/mcp-aggregator\n"},
	}
	for _, tt := range tests {
		t.Run(tt.client+"/"+tt.launch.Name, func(t *testing.T) {
			c, ok := Lookup(tt.client)
			require.True(t, ok)
			got := c.Snippet(tt.launch)
			if tt.json != "" {
				assert.JSONEq(t, tt.json, got)
				assert.NotContains(t, got, `\u0026`, "no HTML escaping")
				return
			}
			assert.Equal(t, tt.text, got)
		})
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"mcp-aggregator", "mcp-aggregator"},
		{"/usr/local/bin/a_b.c=d:e@f%g+h,i", "/usr/local/bin/a_b.c=d:e@f%g+h,i"},
		{"", "''"},
		{"with space", "'with space'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"a;rm -rf /", "'a;rm -rf /'"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, shellQuote(tt.in), tt.in)
	}
}

func TestTOML(t *testing.T) {
	tests := []struct{ in, key, str string }{
		{"mcp-aggregator", "mcp-aggregator", `"mcp-aggregator"`},
		{"a_b-9", "a_b-9", `"a_b-9"`},
		{"", `""`, `""`},
		{"my.agg", `"my.agg"`, `"my.agg"`},
		{`C:\bin "x" <y>`, `"C:\\bin \"x\" <y>"`, `"C:\\bin \"x\" <y>"`},
		{"tab\there", `"tab\there"`, `"tab\there"`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.key, tomlKey(tt.in), tt.in)
		assert.Equal(t, tt.str, tomlString(tt.in), tt.in)
	}
}

func TestPin(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "here.yaml"), []byte("version: 1\n"), 0o644))
	t.Chdir(dir)
	wd, err := os.Getwd()
	require.NoError(t, err)

	abs, missing := Pin([]string{"here.yaml", "sub/later.yaml", filepath.Join(wd, "here.yaml")})
	assert.Equal(t, []string{filepath.Join(wd, "here.yaml"), filepath.Join(wd, "sub/later.yaml"), filepath.Join(wd, "here.yaml")}, abs)
	assert.Equal(t, []string{filepath.Join(wd, "sub/later.yaml")}, missing)

	abs, missing = Pin(nil)
	assert.Empty(t, abs)
	assert.Empty(t, missing)
}

func TestTemporaryBuild(t *testing.T) {
	assert.True(t, TemporaryBuild("/tmp/go-build123456/b001/exe/mcp-aggregator"))
	assert.False(t, TemporaryBuild("/usr/local/bin/mcp-aggregator"))
}

// TestCommandKeepsTheNameOnPATH: started through a symlink on PATH (as package
// managers install binaries), or by that symlink's path, the command is that symlink,
// which an upgrade keeps, not the file it points to now; a name that leads elsewhere,
// or nowhere, gives the executable itself.
func TestCommandKeepsTheNameOnPATH(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	bin := t.TempDir()
	link := filepath.Join(bin, "mcp-aggregator")
	require.NoError(t, os.Symlink(exe, link))
	other := filepath.Join(t.TempDir(), "mcp-aggregator")
	require.NoError(t, os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755))

	tests := []struct {
		name, path, arg0, want string
	}{
		{"a name on PATH that links here", bin, "mcp-aggregator", link},
		{"the link's own path", bin, link, link},
		{"a name on PATH that is another file", filepath.Dir(other), "mcp-aggregator", exe},
		{"a name not on PATH", t.TempDir(), "mcp-aggregator", exe},
		{"no name", bin, "", exe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			got, err := Command(tt.arg0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
