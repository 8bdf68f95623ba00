package config

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadFullConfig(t *testing.T) {
	env := map[string]string{"HOST_TOKEN": "host-token", "GITHUB_TOKEN": "gh-secret"}
	ws, problems := Load([]string{"testdata/full.yaml"}, envOf(env))
	require.NotNil(t, ws, render(problems))
	require.Empty(t, problems, render(problems))

	dir, err := filepath.Abs("testdata")
	require.NoError(t, err)
	assert.Equal(t, []string{"testdata/full.yaml"}, ws.Files)
	assert.Equal(t, Limits{MaxConcurrent: 64, MaxInstances: DefaultMaxInstances}, ws.Limits)
	assert.Equal(t, []string{"npx", "uvx", "docker", "node"}, ws.Security.AllowedCommands)
	assert.Equal(t, DefaultValidPattern, ws.Naming.ValidPattern)
	assert.Equal(t, Admin{Enabled: true, LeaseReminder: false}, ws.Admin)
	assert.Empty(t, ws.Rejected)
	require.Len(t, ws.Servers, 3)

	pw := ws.Server("playwright")
	require.NotNil(t, pw)
	assert.Equal(t, "testdata/full.yaml", pw.File)
	assert.Equal(t, 14, pw.Line)
	assert.False(t, pw.Stateless)
	assert.Equal(t, TransportStdio, pw.Transport)
	assert.Equal(t, "npx", pw.Command)
	assert.Equal(t, []string{"-y", "@playwright/mcp@latest", "--port=${PORT}"}, pw.Args)
	assert.Equal(t, filepath.Join(dir, "work"), pw.Cwd)
	assert.Equal(t, map[string]string{
		"LITERAL":  "value",
		"NUMBER":   "42",
		"FLAG":     "true",
		"TOKEN":    "from-file-token", // env_file wins over the host
		"URL":      "https://api.internal/api",
		"FALLBACK": "fallback",
	}, pw.Env)
	assert.Equal(t, "auto", pw.Protocol)
	assert.True(t, pw.Required)
	assert.Equal(t, 45*time.Second, pw.ConnectTimeout)
	assert.Equal(t, 2*time.Minute, pw.RequestTimeout)
	assert.Equal(t, Tools{
		Whitelist: []string{"browser_*", "page_*"},
		Blacklist: []string{"*_unsafe"},
		Mode:      ModeDynamic,
		Defaults:  ToolSettings{Timeout: 30 * time.Second, MaxInstances: 10},
		Config: map[string]ToolSettings{
			"browser_navigate": {Timeout: 2 * time.Minute, MaxInstances: 2},
			"browser_click":    {},
		},
	}, pw.Tools)
	assert.Equal(t, []Transform{
		{Kind: TransformPrefix, Add: "playwright_"},
		{Kind: TransformPrefix, Remove: "stock_prefix_", Add: "my_prefix_"},
		{Kind: TransformSuffix, Add: "_pw"},
	}, pw.Transforms)
	assert.Equal(t, Lease{IdleTTL: 30 * time.Minute, MaxInstances: 8, Prewarm: 1}, pw.Lease)
	assert.True(t, pw.LeaseReminder, "the server's own lease_reminder wins over admin.lease_reminder")
	assert.Len(t, pw.Hash, 64)

	gh := ws.Server("github")
	require.NotNil(t, gh)
	assert.Equal(t, TransportHTTP, gh.Transport, "http is an alias of streamable_http")
	assert.Equal(t, "https://api.example.com/mcp", gh.URL)
	assert.Equal(t, map[string]string{"Authorization": "Bearer gh-secret", "X-Client-Name": "mcp-aggregator"}, gh.Headers)
	assert.Equal(t, "abc123", gh.SessionID)
	assert.Equal(t, "2025-11-25", gh.Protocol)
	assert.True(t, gh.Stateless)
	assert.Equal(t, ModeStrict, gh.Tools.Mode)
	assert.Equal(t, map[string]ToolSettings{"search_repositories": {}}, gh.Tools.Config)
	assert.False(t, gh.LeaseReminder, "falls back to admin.lease_reminder")
	assert.Equal(t, dir, gh.Cwd, "cwd defaults to the config file's directory")
	assert.Equal(t, DefaultConnectTimeout, gh.ConnectTimeout)

	sse := ws.Server("local-sse")
	require.NotNil(t, sse)
	assert.Equal(t, TransportSSE, sse.Transport)
	assert.Equal(t, 1500*time.Millisecond, sse.RequestTimeout)
	assert.Nil(t, ws.Server("absent"))
}

func TestLoadDefaults(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nservers:\n  fs:\n    command: mcp-fs\n", nil)
	require.NotNil(t, ws)
	require.Empty(t, problems)
	assert.Equal(t, Admin{Enabled: true, LeaseReminder: true}, ws.Admin)
	assert.Equal(t, DefaultValidPattern, ws.Naming.ValidPattern)
	fs := ws.Server("fs")
	require.NotNil(t, fs)
	assert.Equal(t, TransportStdio, fs.Transport)
	assert.Equal(t, "auto", fs.Protocol)
	assert.Equal(t, 30*time.Second, fs.ConnectTimeout)
	assert.Equal(t, 60*time.Second, fs.RequestTimeout)
	assert.Equal(t, ModeDynamic, fs.Tools.Mode)
	assert.True(t, fs.LeaseReminder)
	assert.False(t, fs.Stateless)
}

func TestLoadEmptyServers(t *testing.T) {
	for _, text := range []string{"version: 1\n", "version: 1\nservers:\n", "version: 1\nservers: {}\n"} {
		ws, problems := loadYAML(t, text, nil)
		require.NotNil(t, ws, text)
		assert.Empty(t, problems, text)
		assert.Empty(t, ws.Servers, text)
	}
}

func TestDefaultPaths(t *testing.T) {
	assert.Equal(t, []string{"./mcp-aggregator.yaml", "./.minds/mcp.yaml"}, DefaultPaths())
}

func TestNilWorkspaceServer(t *testing.T) {
	var ws *Workspace
	assert.Nil(t, ws.Server("x"))
}

func TestLoadMistakesExample(t *testing.T) {
	ws, problems := Load([]string{"testdata/mistakes.yaml"}, nil)
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, ws.Servers)
	assert.Equal(t, []string{"ws", "nocmd", "nourl", "plain", "env", "times", "names"}, ws.Rejected)
	for _, p := range problems {
		assert.NotEmpty(t, p.Server, p.String())
		assert.Positive(t, p.Line, p.String())
	}
}

func TestLoadLayeredExample(t *testing.T) {
	dir := writeFiles(t, map[string]string{"project.yaml": "version: 1\nservers:\n  search: {command: uvx, args: [search-mcp]}\n"})
	ws, problems := Load([]string{"testdata/layered-global.yaml", filepath.Join(dir, "project.yaml")},
		envOf(map[string]string{"SECRET": "s", "HOME": "/home/u"}))
	require.NotNil(t, ws)
	// x-common is the only warning: the anchor holder is not a known key.
	require.Len(t, problems, 1, render(problems))
	assert.Equal(t, "x-common", problems[0].Field)

	fs := ws.Server("fs")
	assert.Equal(t, []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/u"}, fs.Args)
	assert.Equal(t, 2*time.Minute, fs.RequestTimeout)
	assert.Equal(t, ToolSettings{Timeout: 30 * time.Second, MaxInstances: 4}, fs.Tools.Defaults)
	assert.Equal(t, []Transform{{Kind: TransformPrefix, Add: "mcp__fs__"}}, fs.Transforms)

	search := ws.Server("search")
	assert.Equal(t, TransportStdio, search.Transport, "the project definition replaced the remote one whole")
	assert.Equal(t, DefaultRequestTimeout, search.RequestTimeout)
}
