package config

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ids(ws *Workspace) []string {
	var out []string
	for _, s := range ws.Servers {
		out = append(out, s.ID)
	}
	return out
}

func TestLoadLayersFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"global.yaml": `version: 1
limits: {max_concurrent: 8}
security: {allowed_commands: [npx]}
servers:
  fs: {command: npx, args: [global]}
  web: {url: https://web.example/mcp}
  broken: {transport: websocket}
`,
		"project.yaml": `version: 1
limits: {max_concurrent: 16}
admin: {lease_reminder: false}
servers:
  local: {command: npx}
  fs: {command: npx, args: [project]}
  broken: {command: npx}
`,
	})
	ws, problems := Load([]string{filepath.Join(dir, "global.yaml"), filepath.Join(dir, "project.yaml")}, nil)
	require.NotNil(t, ws)
	assert.Empty(t, problems, "the broken global definition is replaced, so its problems are gone: %s", render(problems))

	// Replaced servers keep the position of their first definition; new ones append.
	assert.Equal(t, []string{"fs", "web", "broken", "local"}, ids(ws))
	assert.Equal(t, []string{"project"}, ws.Server("fs").Args)
	assert.Equal(t, filepath.Join(dir, "project.yaml"), ws.Server("fs").File)
	assert.Equal(t, 16, ws.Limits.MaxConcurrent, "later files override settings they set")
	assert.Equal(t, []string{"npx"}, ws.Security.AllowedCommands, "settings a later file leaves out are kept")
	assert.False(t, ws.Admin.LeaseReminder)
	assert.False(t, ws.Server("web").LeaseReminder, "the merged admin default reaches servers of every file")
	assert.Len(t, ws.Files, 2)
}

func TestLoadLaterInvalidDefinitionRejects(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "version: 1\nservers:\n  fs: {command: npx}\n  other: {command: npx}\n",
		"b.yaml": "version: 1\nservers:\n  fs: {transport: stdio}\n",
	})
	ws, problems := Load([]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")}, nil)
	require.NotNil(t, ws)
	assert.Equal(t, []string{"other"}, ids(ws))
	assert.Equal(t, []string{"fs"}, ws.Rejected)
	p := problemAt(t, problems, "command")
	assert.Equal(t, filepath.Join(dir, "b.yaml"), p.File)
}

func TestLoadMissingFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": "version: 1\nservers:\n  fs: {command: npx}\n"})
	missing := filepath.Join(dir, "nope.yaml")
	ws, problems := Load([]string{filepath.Join(dir, "a.yaml"), missing}, nil)
	require.NotNil(t, ws, "a missing file is an empty config")
	assert.Equal(t, []string{"fs"}, ids(ws))
	require.Len(t, problems, 1)
	assert.Equal(t, SeverityError, problems[0].Severity)
	assert.Equal(t, missing, problems[0].File)
	assert.Contains(t, problems[0].Message, "file does not exist")
}

func TestLoadWorkspaceErrorInAnyFileVoidsAll(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "version: 1\nservers:\n  fs: {command: npx}\n",
		"b.yaml": "version: 3\n",
	})
	ws, problems := Load([]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")}, nil)
	assert.Nil(t, ws)
	assert.True(t, HasErrors(problems))
}

func TestLoadBytes(t *testing.T) {
	ws, problems := LoadBytes("/etc/mcp/mcp.yaml", []byte("version: 1\nservers:\n  fs: {command: npx}\n"), nil)
	require.Empty(t, problems)
	assert.Equal(t, "/etc/mcp", ws.Server("fs").Cwd)
}
