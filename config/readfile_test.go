package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigPathIsADirectory: a directory given as a config file is refused with an
// error that says so and names a file to give instead, when checked and when served
// (LoadExisting), where it is not taken for a deleted file.
func TestConfigPathIsADirectory(t *testing.T) {
	dir := t.TempDir()
	for name, load := range map[string]func([]string, func(string) (string, bool)) (*Workspace, []Problem){
		"Load": Load, "LoadExisting": LoadExisting,
	} {
		t.Run(name, func(t *testing.T) {
			ws, problems := load([]string{dir}, nil)
			assert.Nil(t, ws, "a directory is no config: the load is rejected")
			require.Len(t, problems, 1, render(problems))
			p := problems[0]
			assert.Equal(t, SeverityError, p.Severity)
			assert.Equal(t, dir, p.File)
			assert.Contains(t, p.Message, "is a directory, not a config file")
			assert.Contains(t, p.Message, filepath.Join(dir, "mcp-aggregator.yaml"))
			assert.NotContains(t, p.Message, "permissions")
		})
	}
}

// TestConfigFileVanished: a config file deleted while serving means no servers.
func TestConfigFileVanished(t *testing.T) {
	ws, problems := LoadExisting([]string{filepath.Join(t.TempDir(), "gone.yaml")}, nil)
	require.NotNil(t, ws)
	assert.Empty(t, ws.Servers)
	assert.Contains(t, render(problems), "treated as empty")
}

// TestImportNotesNameTheField: a note on an imported server names the setting it is
// about.
func TestImportNotesNameTheField(t *testing.T) {
	out, problems := Import([]ImportFile{{Name: "c.json", Data: []byte(`{"mcpServers": {"a": {"command": "x", "alwaysAllow": ["t"]}}}`)}})
	require.False(t, HasErrors(problems), render(problems))
	assert.Contains(t, string(out), "# note: alwaysAllow: a setting of the client")
}

// TestTabIndentation: a line indented with a tab is named, with the fix.
func TestTabIndentation(t *testing.T) {
	ws, problems := LoadBytes("c.yaml", []byte("version: 1\nservers:\n  a: {command: ls}\n\tb: {command: ls}\n"), nil)
	assert.Nil(t, ws)
	require.Len(t, problems, 1, render(problems))
	assert.Equal(t, 4, problems[0].Line)
	assert.Contains(t, problems[0].Message, "indent that line with spaces: YAML does not allow tabs in indentation")

	_, problems = LoadBytes("c.yaml", []byte("version: 1\nservers:\n  a: {command: [ls}\n"), nil)
	require.Len(t, problems, 1, render(problems))
	assert.Contains(t, problems[0].Message, "fix the syntax on that line")
}

// TestWatchSnapshotIsStable: the summary the poll compares is the same for unchanged
// files, however many there are, so layered config files are not reloaded for nothing.
func TestWatchSnapshotIsStable(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{}
	for _, name := range []string{"a.yaml", "b.yaml", "c.yaml", "d.yaml", "e.yaml"} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte("version: 1\n"), 0o644))
		files[path] = true
	}
	files[filepath.Join(dir, "absent.yaml")] = true
	first := snapshot(files)
	for range 200 {
		require.Equal(t, first, snapshot(files))
	}
}

// TestWorkspaceEnvFiles: the workspace names every env_file its servers name, by
// absolute path, whether it exists or not, so that both can be watched.
func TestWorkspaceEnvFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.env"), []byte("A=1\n"), 0o600))
	path := filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers:\n  a: {command: ls, env_file: a.env}\n  b: {command: ls, env_file: b.env}\n  c: {command: ls, env_file: a.env}\n  d: {command: ls}\n"), 0o600))
	ws, problems := Load([]string{path}, nil)
	require.NotNil(t, ws, render(problems))
	assert.Equal(t, []string{filepath.Join(dir, "a.env"), filepath.Join(dir, "b.env")}, ws.EnvFiles)
}

// TestWatchFileInMissingDirectory: a file whose directory does not exist yet (an
// env_file with a wrong path, say) is watched by the poll, and the other files by
// events as before.
func TestWatchFileInMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\n"), 0o600))
	missing := filepath.Join(dir, "later", "app.env")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := Watch(ctx, []string{path, missing}, timing(10*time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: {}\n"), 0o600))
	waitSignal(t, ch, 10*time.Second)
	require.NoError(t, os.MkdirAll(filepath.Dir(missing), 0o700))
	require.NoError(t, os.WriteFile(missing, []byte("A=1\n"), 0o600))
	waitSignal(t, ch, 10*time.Second)
}
