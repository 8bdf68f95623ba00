package integration

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The last line of an import that writes nothing because its result would not run.
const importRefused = "error: nothing was written, since the result would not run as it is; fix the errors above and import again (variables not set yet are warnings only)"

// stderrLines is stderr a line each, without the empty last one.
func stderrLines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// importedYAML is the config import wrote, decoded (its comments aside).
func importedYAML(t *testing.T, text string) map[string]any {
	t.Helper()
	var out map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(text), &out), text)
	return out
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestImportRefusesAResultThatCannotRun: an import whose result would not run as it is,
// for a reason other than a variable not set yet, exits 1 naming each server at fault,
// where it was defined and how to fix it or leave it out, and writes nothing: not to
// stdout, and with --output not to the file, which keeps what it held.
func TestImportRefusesAResultThatCannotRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string // name -> text; the files are imported in name order
		args  []string          // flags before the files
		want  []string          // the lines of stderr
	}{
		{
			name:  "a server with neither command nor url",
			files: map[string]string{"claude_desktop_config.json": "{\"mcpServers\": {\n  \"ok\": {\"command\": \"sh\"},\n  \"broken\": {\"args\": [\"--port\", \"3000\"]}\n}}\n"},
			want: []string{
				"checking the result:",
				`error: server "broken": command: required (or url: for a remote server); set command to the program that starts the server, or url to its endpoint, e.g. https://example.com/mcp`,
				`error: server "broken" (from claude_desktop_config.json line 3) cannot run as imported: fix it in claude_desktop_config.json as the errors above say, or leave it out with --exclude broken`,
				importRefused,
			},
		},
		{
			name:  "an entry that is not an object",
			files: map[string]string{".mcp.json": "{\"mcpServers\": {\n  \"ok\": {\"command\": \"sh\"},\n  \"broken\": \"npx -y some-server\"\n}}\n"},
			want: []string{
				"checking the result:",
				`error: server "broken": a server must be a mapping of settings; add command: (stdio) or url: (streamable_http, sse)`,
				`error: server "broken" (from .mcp.json line 3) cannot run as imported: fix it in .mcp.json as the errors above say, or leave it out with --exclude broken`,
				importRefused,
			},
		},
		{
			name:  "a server id the naming rules refuse",
			files: map[string]string{"mcp.yaml": "version: 1\nservers:\n  ok: {command: sh}\n  my server: {command: sh}\n"},
			want: []string{
				"checking the result:",
				`error: server "my server": server id must be 1 to 64 letters, digits, '.', '_' or '-'; rename it`,
				`error: server "my server" (from mcp.yaml line 4) cannot run as imported: fix it in mcp.yaml as the errors above say, or leave it out with --exclude 'my server'`,
				importRefused,
			},
		},
		{
			name:  "a url that does not parse",
			files: map[string]string{".cursor/mcp.json": "{\"mcpServers\": {\n  \"ok\": {\"command\": \"sh\"},\n  \"remote\": {\"url\": \"https://exa mple.com/mcp\"}\n}}\n"},
			want: []string{
				"checking the result:",
				`error: server "remote": url: not a valid http:// or https:// URL with a host; write it like https://example.com/mcp`,
				`error: server "remote" (from .cursor/mcp.json line 3) cannot run as imported: fix it in .cursor/mcp.json as the errors above say, or leave it out with --exclude remote`,
				importRefused,
			},
		},
		{
			name:  "a server defined twice in one file",
			files: map[string]string{"mcp.json": "{\"mcpServers\": {\n  \"a\": {\"command\": \"sh\"},\n  \"a\": {\"command\": \"bash\"}\n}}\n"},
			want: []string{
				`error: mcp.json:3: server "a": defined again (first on line 2), which loading this file refuses; rename or remove one of them`,
				`error: server "a" (from mcp.json line 3) cannot run as imported: fix it in mcp.json as the errors above say, or leave it out with --exclude a`,
				importRefused,
			},
		},
		{
			name:  "an entry without a name",
			files: map[string]string{"agent.yaml": "tools:\n  - name: ok\n    type: mcp\n    command: sh\n  - type: mcp\n    command: sh\n"},
			want: []string{
				"error: agent.yaml:5: tools[1].name: an MCP tool needs a name, which becomes its server id; add name:",
				importRefused,
			},
		},
		{
			name: "a file that cannot be read beside one that can",
			files: map[string]string{
				"a.json": `{"mcpServers": {"ok": {"command": "sh"}}}`,
				"b.json": `{"mcpServers": {"x": {"command": "sh",}}`,
			},
			want: []string{
				"error: b.json:1: invalid JSON: the JSON ends before it is complete (a '}' or ']' is missing); fix the syntax on that line",
				importRefused,
			},
		},
		{
			name:  "an --exclude that names no server",
			files: map[string]string{"mcp.json": `{"mcpServers": {"ok": {"command": "sh"}}}`},
			args:  []string{"--exclude", "Ok"},
			want: []string{
				`error: --exclude: no server of the files is read as "Ok"; name a server by the id it is read as, which problems and comments give`,
				importRefused,
			},
		},
		{
			name:  "no server could be read",
			files: map[string]string{"mcp.json": `{"mcpServers": ["sh"]}`},
			want: []string{
				"error: mcp.json:1: mcpServers: must be an object of server name: settings",
				"error: no server could be read; nothing was written",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var names []string
			for name, text := range tt.files {
				writeFile(t, dir, name, text)
				names = append(names, name)
			}
			sort.Strings(names)

			res := runCLIIn(t, dir, nil, append(append([]string{"import"}, tt.args...), names...)...)
			assert.Equal(t, 1, res.code, "stderr: %s", res.stderr)
			assert.Empty(t, res.stdout, "nothing half-written")
			assert.Equal(t, tt.want, stderrLines(res.stderr))

			t.Run("--output", func(t *testing.T) {
				const before = "version: 1\nservers:\n  kept: {command: sh}\n"
				target := writeFile(t, dir, "mcp-aggregator.yaml", before)
				listed := dirNames(t, dir)
				res := runCLIIn(t, dir, nil, append(append([]string{"import", "--output", "mcp-aggregator.yaml"}, tt.args...), names...)...)
				assert.Equal(t, 1, res.code, "stderr: %s", res.stderr)
				assert.Empty(t, res.stdout)
				assert.Equal(t, tt.want, stderrLines(res.stderr))
				got, err := os.ReadFile(target)
				require.NoError(t, err)
				assert.Equal(t, before, string(got), "the file keeps what it held")
				assert.Equal(t, listed, dirNames(t, dir), "nothing left beside it")
			})
		})
	}
}

// TestImportWithVariablesNotSetSucceeds: a result that would run once the variables it
// reads are set (and the env_file they come from is there) is written, with exit status
// 0 and each variable not set yet as a warning; once they are set, it runs.
func TestImportWithVariablesNotSetSucceeds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "mcp.json", `{"mcpServers": {
  "local": {"command": "sh", "envFile": ".secrets.env", "env": {"TOKEN": "${IMPORT_T4_TOKEN}"}},
  "remote": {"type": "http", "url": "https://${IMPORT_T4_HOST}/mcp", "headers": {"Authorization": "Bearer ${env:IMPORT_T4_KEY}"}}
}}
`)
	wantYAML := map[string]any{
		"version": 1,
		"servers": map[string]any{
			"local":  map[string]any{"command": "sh", "env_file": ".secrets.env", "env": map[string]any{"TOKEN": "${IMPORT_T4_TOKEN}"}},
			"remote": map[string]any{"transport": "streamable_http", "url": "https://${IMPORT_T4_HOST}/mcp", "headers": map[string]any{"Authorization": "Bearer ${IMPORT_T4_KEY}"}},
		},
	}
	wantWarnings := []string{
		"checking the result:",
		`warning: mcp-aggregator.yaml:10: server "local": env_file: file ".secrets.env" does not exist (paths are relative to the config file's directory); create it or fix the path`,
		`warning: mcp-aggregator.yaml:12: server "local": env.TOKEN: variable IMPORT_T4_TOKEN (in ${IMPORT_T4_TOKEN}) is not set; export it, add it to env_file ".secrets.env", or give a default with ${IMPORT_T4_TOKEN:-value}`,
		`warning: mcp-aggregator.yaml:16: server "remote": url: variable IMPORT_T4_HOST (in ${IMPORT_T4_HOST}) is not set; export it, add it to an env_file, or give a default with ${IMPORT_T4_HOST:-value}`,
		`warning: mcp-aggregator.yaml:18: server "remote": headers.Authorization: variable IMPORT_T4_KEY (in ${IMPORT_T4_KEY}) is not set; export it, add it to an env_file, or give a default with ${IMPORT_T4_KEY:-value}`,
	}

	res := runCLIIn(t, dir, nil, "import", "mcp.json")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, wantWarnings, stderrLines(res.stderr))
	assert.Equal(t, wantYAML, importedYAML(t, res.stdout))

	// The same to a file, named after the files: written whole, readable by its owner.
	res2 := runCLIIn(t, dir, nil, "import", "mcp.json", "-o", "mcp-aggregator.yaml")
	require.Equal(t, 0, res2.code, "stderr: %s", res2.stderr)
	assert.Empty(t, res2.stdout)
	assert.Equal(t, append([]string{"wrote mcp-aggregator.yaml: 2 server(s)"}, wantWarnings...), stderrLines(res2.stderr))
	written, err := os.ReadFile(filepath.Join(dir, "mcp-aggregator.yaml"))
	require.NoError(t, err)
	assert.Equal(t, res.stdout, string(written))
	info, err := os.Stat(filepath.Join(dir, "mcp-aggregator.yaml"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// Set the variables, create the env file, and the written config checks clean.
	writeFile(t, dir, ".secrets.env", "IMPORT_T4_TOKEN=from-the-env-file\n")
	check := runCLIIn(t, dir, []string{"IMPORT_T4_HOST=mcp.example.com", "IMPORT_T4_KEY=k-0123456789"}, "check", "--config", "mcp-aggregator.yaml")
	assert.Equal(t, 0, check.code, "stdout: %s\nstderr: %s", check.stdout, check.stderr)
	assert.NotContains(t, check.stdout, "error:")
}

// TestImportExcludeLeavesAServerOut: --exclude, before or after the files, leaves the
// server at fault out, and the import succeeds; the comment at the top says so.
func TestImportExcludeLeavesAServerOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "claude_desktop_config.json", "{\"mcpServers\": {\n  \"ok\": {\"command\": \"sh\"},\n  \"broken\": {\"args\": [\"x\"]},\n  \"Brave Search\": {\"command\": \"sh\"}\n}}\n")
	for _, args := range [][]string{
		{"import", "--exclude", "broken", "--exclude=Brave-Search", "claude_desktop_config.json"},
		{"import", "claude_desktop_config.json", "--exclude", "broken", "--exclude", "Brave-Search"},
	} {
		res := runCLIIn(t, dir, nil, args...)
		require.Equal(t, 0, res.code, "%v\nstderr: %s", args, res.stderr)
		assert.Empty(t, res.stderr, "no note of the servers left out")
		assert.Equal(t, map[string]any{"version": 1, "servers": map[string]any{"ok": map[string]any{"command": "sh"}}}, importedYAML(t, res.stdout))
		assert.Contains(t, res.stdout, "#   left out: broken (--exclude)\n#   left out: Brave-Search (--exclude)\n")
	}
}

// TestImportRenamedServers: names the naming rules refuse are read as valid ids with a
// warning, and a server already named with a valid id keeps it, whatever comes first;
// a renamed server replaced by a later file's is warned about; the result runs, so the
// import succeeds.
func TestImportRenamedServers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, ".mcp.json", "{\"mcpServers\": {\n  \"Brave Search\": {\"command\": \"sh\", \"args\": [\"renamed\"]},\n  \"Brave-Search\": {\"command\": \"sh\", \"args\": [\"valid\"]}\n}}\n")
	res := runCLIIn(t, dir, nil, "import", ".mcp.json")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, []string{
		`warning: .mcp.json:2: server "Brave-Search-2": "Brave Search" is not a valid server id here (1 to 64 letters, digits, '.', '_' or '-'); it is read as "Brave-Search-2"`,
	}, stderrLines(res.stderr))
	assert.Equal(t, map[string]any{"version": 1, "servers": map[string]any{
		"Brave-Search-2": map[string]any{"command": "sh", "args": []any{"renamed"}},
		"Brave-Search":   map[string]any{"command": "sh", "args": []any{"valid"}},
	}}, importedYAML(t, res.stdout))

	// A later file's server replaces an earlier one of the same id, as --config layers
	// do; when their names differ, the replacement is said.
	writeFile(t, dir, "global.json", "{\"mcpServers\": {\n  \"Brave Search\": {\"command\": \"sh\", \"args\": [\"global\"]}\n}}\n")
	writeFile(t, dir, "project.json", "{\"mcpServers\": {\n  \"Brave-Search\": {\"command\": \"sh\", \"args\": [\"project\"]}\n}}\n")
	res = runCLIIn(t, dir, nil, "import", "global.json", "project.json")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, []string{
		`warning: global.json:2: server "Brave-Search": "Brave Search" is not a valid server id here (1 to 64 letters, digits, '.', '_' or '-'); it is read as "Brave-Search"`,
		`warning: project.json:2: server "Brave-Search": "Brave-Search" replaces "Brave Search" of global.json line 2, both read as "Brave-Search"; rename one of them in its file to keep both`,
	}, stderrLines(res.stderr))
	assert.Equal(t, map[string]any{"version": 1, "servers": map[string]any{
		"Brave-Search": map[string]any{"command": "sh", "args": []any{"project"}},
	}}, importedYAML(t, res.stdout))
}
