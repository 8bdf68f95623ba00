package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCwdMustBeADirectory: a cwd the process could not start in is the server's error,
// named by field and resolved path, not a start failure that blames the command.
func TestCwdMustBeADirectory(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"mcp.yaml": "version: 1\nservers:\n  good:\n    command: npx\n    cwd: sub\n" +
			"  c:\n    command: npx\n    cwd: nosuchdir\n" +
			"  f:\n    command: npx\n    cwd: afile\n",
		"sub/x": "",
		"afile": "",
	})
	ws, problems := Load([]string{filepath.Join(dir, "mcp.yaml")}, nil)
	require.NotNil(t, ws, render(problems))
	assert.ElementsMatch(t, []string{"c", "f"}, ws.Rejected, render(problems))
	require.NotNil(t, ws.Server("good"))
	assert.Equal(t, filepath.Join(dir, "sub"), ws.Server("good").Cwd)

	var byServer = map[string]Problem{}
	for _, p := range problems {
		require.Equal(t, "cwd", p.Field, render(problems))
		require.Equal(t, SeverityError, p.Severity)
		byServer[p.Server] = p
	}
	require.Len(t, byServer, 2, render(problems))
	c := byServer["c"]
	assert.Equal(t, 8, c.Line)
	assert.Contains(t, c.Message, `"nosuchdir"`)
	assert.Contains(t, c.Message, filepath.Join(dir, "nosuchdir"), "the resolved path")
	assert.Contains(t, c.Message, "does not exist")
	assert.Contains(t, c.Message, "create it or fix the path")
	f := byServer["f"]
	assert.Equal(t, 11, f.Line)
	assert.Contains(t, f.Message, filepath.Join(dir, "afile"))
	assert.Contains(t, f.Message, "is not a directory")
}

// TestCwdAbsoluteAndFromEnv: an absolute cwd is checked as is; one built from the
// environment is checked too, but its value is never shown.
func TestCwdAbsoluteAndFromEnv(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	ws, problems := loadYAML(t, "version: 1\nservers:\n  a:\n    command: npx\n    cwd: '"+missing+"'\n", nil)
	require.NotNil(t, ws)
	p := problemAt(t, problems, "cwd")
	assert.Contains(t, p.Message, `"`+missing+`" does not exist`)

	ws, problems = loadYAML(t, "version: 1\nservers:\n  a:\n    command: npx\n    cwd: '${SECRET_DIR}'\n",
		map[string]string{"SECRET_DIR": missing})
	require.NotNil(t, ws)
	assert.Equal(t, []string{"a"}, ws.Rejected)
	p = problemAt(t, problems, "cwd")
	assert.NotContains(t, p.Message, "gone")
	assert.Contains(t, p.Message, "<value from the environment>")

	ws, problems = loadYAML(t, "version: 1\nservers:\n  a:\n    command: npx\n    cwd: '${D}'\n", map[string]string{"D": os.TempDir()})
	require.Empty(t, problems, render(problems))
	assert.NotNil(t, ws.Server("a"))
}

// TestCwdIgnoredForRemotes: cwd means nothing to a remote server, so it is only warned
// about, however wrong it is.
func TestCwdIgnoredForRemotes(t *testing.T) {
	ws, problems := loadYAML(t, "version: 1\nservers:\n  r:\n    url: https://example.com/mcp\n    cwd: nosuchdir\n", nil)
	require.NotNil(t, ws.Server("r"), render(problems))
	p := problemAt(t, problems, "cwd")
	assert.Equal(t, SeverityWarning, p.Severity)
}
