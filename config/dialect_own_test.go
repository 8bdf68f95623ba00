package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownKeysJSON is a native config written as JSON without its version: read as a TENEX
// mcp.json it would lose its transform, its truely-stateless and, worst, its whitelist,
// exporting every tool the whitelist hides.
const ownKeysJSON = `{"servers": {"a": {"command": "x", "transform": [{"prefix": "a_"}], "truely-stateless": true, "tools": {"whitelist": ["read_*"]}}}}`

// TestDialectOwnKeysNeedVersion: a file with servers and no version that uses keys of
// the native format, and of no client's servers JSON, is read as native and rejected
// for its missing version, in JSON, in YAML written as JSON and in YAML; a file that
// uses only a client's keys is still read as that client's config.
func TestDialectOwnKeysNeedVersion(t *testing.T) {
	tests := []struct {
		name, file, text string
		want             Dialect  // for a file that loads
		fields           []string // for a native file without version: the own keys named
	}{
		{"JSON with transform, truely-stateless and a whitelist", "mcp.json", ownKeysJSON, "",
			[]string{"servers.a.transform", "servers.a.truely-stateless", "servers.a.tools"}},
		{"YAML written as JSON", "mcp-aggregator.yaml", ownKeysJSON, "",
			[]string{"servers.a.transform", "servers.a.truely-stateless", "servers.a.tools"}},
		{"JSON with a whitelist alone", "mcp.json", `{"servers": {"a": {"command": "x", "tools": {"whitelist": ["read_*"]}}}}`, "",
			[]string{"servers.a.tools"}},
		{"JSON with an own key on a later server", "mcp.json", `{"servers": {"a": {"command": "x"}, "b": {"url": "https://b.example.com/mcp", "auth": {"type": "oauth"}}}}`, "",
			[]string{"servers.b.auth"}},
		{"JSON with a workspace setting", "mcp.json", `{"limits": {"max_concurrent": 4}, "servers": {"a": {"command": "x"}}}`, "",
			[]string{"limits"}},
		{"JSON with a server key written like a client's", "mcp.json", `{"servers": {"a": {"command": "x", "env_file": ".env", "request_timeout": "2m"}}}`, "",
			[]string{"servers.a.env_file", "servers.a.request_timeout"}},
		{"YAML", "mcp-aggregator.yaml", "servers:\n  a:\n    command: x\n    transform: [{prefix: a_}]\n    truely-stateless: true\n    tools: {whitelist: ['read_*']}\n", "", nil},

		{"TENEX with its own keys", "mcp.json", `{"servers": {"a": {"command": "x", "args": ["y"], "env": {"K": "v"}, "allowedPaths": ["/p"]}}, "enabled": true}`, DialectTENEX, nil},
		{"TENEX with a transport", "mcp.json", `{"servers": {"a": {"transport": "stdio", "command": "x", "cwd": "/tmp"}}}`, DialectTENEX, nil},
		{"TENEX with a client setting", "mcp.json", `{"servers": {"a": {"command": "x", "timeout": 3000, "disabled": false}}}`, DialectTENEX, nil},
		{"VS Code", "mcp.json", `{"inputs": [], "servers": {"a": {"type": "stdio", "command": "x", "envFile": "${workspaceFolder}/.env", "dev": {}}}}`, DialectVSCode, nil},
		{"VS Code settings.json", "settings.json", `{"mcp": {"servers": {"a": {"type": "http", "url": "https://a.example.com/mcp", "headers": {"X": "y"}}}}}`, DialectVSCode, nil},
		{"mcpServers", "mcp.json", `{"mcpServers": {"a": {"command": "x", "alwaysAllow": ["t"], "includeTools": ["t"]}}}`, DialectMCPServers, nil},
		{"HoloDeck", "agent.yaml", "tools:\n  - {name: a, type: mcp, command: x}\n", DialectHoloDeck, nil},
		{"chatagent", "config.yaml", "mcps:\n  - {name: a, url: 'https://a.example.com/mcp'}\n", DialectChatagent, nil},
		{"native JSON with its version", "mcp.json", `{"version": 1, ` + ownKeysJSON[1:], DialectNative, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{tt.file: tt.text})
			path := filepath.Join(dir, tt.file)
			ws, problems := Load([]string{path}, nil)
			if tt.want != "" {
				require.NotNil(t, ws, render(problems))
				require.Len(t, ws.Sources, 1)
				assert.Equal(t, tt.want, ws.Sources[0].Dialect)
				return
			}
			assert.Nil(t, ws, "a native file without version is rejected: %s", render(problems))
			p := problemAt(t, problems, "version")
			assert.Equal(t, SeverityError, p.Severity)
			assert.Equal(t, path, p.File)
			if tt.fields == nil {
				assert.Contains(t, p.Message, "add version: 1 at the top of the file")
			} else {
				assert.Contains(t, p.Message, `add "version": 1 to its top-level object`)
				assert.Contains(t, p.Message, "("+strings.Join(tt.fields, ", ")+")")
			}
			for _, q := range problems {
				assert.NotContains(t, q.Message, "TENEX skips", "not read as TENEX")
				assert.NotContains(t, q.Message, "unknown key", "no key of the file is taken for a client's mistake")
			}
		})
	}
}

// TestDialectOwnKeysKeepTheirFilters: once given its version, the JSON file that was
// read as TENEX keeps its whitelist, transform and truely-stateless.
func TestDialectOwnKeysKeepTheirFilters(t *testing.T) {
	ws, problems := loadYAML(t, `{"version": 1, `+ownKeysJSON[1:], nil)
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, problems)
	s := ws.Server("a")
	require.NotNil(t, s)
	assert.Equal(t, []string{"read_*"}, s.Tools.Whitelist)
	assert.True(t, s.Stateless)
	assert.Len(t, s.Transforms, 1)
}
