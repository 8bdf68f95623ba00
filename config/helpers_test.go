package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envOf returns a lookup over a fixed map, standing in for os.LookupEnv.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// writeFiles creates files (name -> content) in a fresh directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	}
	return dir
}

// loadYAML loads one config given as text from a temporary mcp.yaml.
func loadYAML(t *testing.T, text string, env map[string]string) (*Workspace, []Problem) {
	t.Helper()
	dir := writeFiles(t, map[string]string{"mcp.yaml": text})
	return Load([]string{filepath.Join(dir, "mcp.yaml")}, envOf(env))
}

// oneServerYAML is a config of one server, s: remote (url:) or, with stdio, a
// command, with the settings given (a server's YAML lines, indented by four).
func oneServerYAML(stdio bool, settings string) string {
	where := "    url: https://mcp.example.com/mcp\n"
	if stdio {
		where = "    command: npx\n"
	}
	return "version: 1\nservers:\n  s:\n" + where + settings
}

// loadValid loads one config given as text, as loadYAML does, and requires it
// to load without an error.
func loadValid(t *testing.T, text string, env map[string]string) *Workspace {
	t.Helper()
	ws, problems := loadYAML(t, text, env)
	require.NotNil(t, ws, render(problems))
	require.False(t, HasErrors(problems), render(problems))
	return ws
}

// problemAt returns the one problem for field, failing when there is not exactly one.
func problemAt(t *testing.T, problems []Problem, field string) Problem {
	t.Helper()
	var found []Problem
	for _, p := range problems {
		if p.Field == field {
			found = append(found, p)
		}
	}
	require.Lenf(t, found, 1, "want one problem for %q, got %v", field, problems)
	return found[0]
}

// assertAuthError loads head (the config's first lines) followed by one
// remote server, s, with the auth given, in the environment env, and checks
// for an error at field whose message contains want and names its line.
func assertAuthError(t *testing.T, head, auth string, env map[string]string, field, want string) {
	t.Helper()
	_, problems := loadYAML(t, head+"servers:\n  s:\n    url: https://mcp.example.com/mcp\n    auth: "+auth+"\n", env)
	p := problemAt(t, problems, field)
	assert.Equal(t, SeverityError, p.Severity)
	assert.Contains(t, p.Message, want)
	assert.Positive(t, p.Line, "the problem names its line")
}

// render joins problems for failure messages and substring checks.
func render(problems []Problem) string {
	var b strings.Builder
	for _, p := range problems {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}
