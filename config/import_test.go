package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idsAndHashes summarizes the servers of a workspace: equal summaries run the same.
func idsAndHashes(ws *Workspace) map[string]string {
	out := map[string]string{}
	for _, s := range ws.Servers {
		out[s.ID] = s.Hash
	}
	return out
}

// importBeside imports files and writes the result beside the first one, where its
// relative paths mean what they meant.
func importBeside(t *testing.T, files ...string) (string, []byte) {
	t.Helper()
	var in []ImportFile
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		in = append(in, ImportFile{Name: f, Data: data})
	}
	out, problems := Import(in)
	require.False(t, HasErrors(problems), render(problems))
	path := filepath.Join(filepath.Dir(files[0]), "imported-"+t.Name()[strings.LastIndex(t.Name(), "/")+1:]+".yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	t.Cleanup(func() { _ = os.Remove(path) })
	return path, out
}

// TestImportRoundTrips: the native YAML import prints for each client's config loads
// to the same servers as the config itself.
func TestImportRoundTrips(t *testing.T) {
	for _, file := range []string{
		"claude_desktop.json", "cursor_mcp.json", "claude_code.mcp.json", "gemini_settings.json",
		"vscode/.vscode/mcp.json", "tenex_mcp.json", "holodeck_agent.yaml", "chatagent.yaml",
	} {
		t.Run(strings.ReplaceAll(file, "/", "_"), func(t *testing.T) {
			src := filepath.Join("testdata/dialects", file)
			want, problems := Load([]string{src}, envOf(dialectEnv))
			require.NotNil(t, want, render(problems))
			path, out := importBeside(t, src)
			got, problems := Load([]string{path}, envOf(dialectEnv))
			require.NotNil(t, got, "%s\n%s", render(problems), out)
			assert.False(t, HasErrors(problems), render(problems))
			assert.Equal(t, DialectNative, got.Sources[0].Dialect)
			assert.Equal(t, idsAndHashes(want), idsAndHashes(got), "%s", out)
			assert.Equal(t, want.Limits, got.Limits)
			text := string(out)
			assert.True(t, strings.HasPrefix(text, "# mcp-aggregator config, written by `mcp-aggregator import` from:"), text)
			assert.Contains(t, text, "read as "+want.Sources[0].Dialect.String())
			for _, s := range want.Servers {
				assert.Contains(t, text, "# from "+filepath.Base(src)+" line ", "every server says where it came from")
				assert.Contains(t, text, "\n  "+s.ID+":\n")
			}
		})
	}
}

func TestImportNotes(t *testing.T) {
	_, out := importBeside(t, "testdata/dialects/vscode/.vscode/mcp.json")
	text := string(out)
	assert.Contains(t, text, "# note: ${input:perplexity-key}: the client would prompt for this value")
	assert.Contains(t, text, "PERPLEXITY_API_KEY: ${PERPLEXITY_KEY}")
	_, out = importBeside(t, "testdata/dialects/claude_desktop.json")
	assert.Contains(t, string(out), "# keep secrets out of this file with NAME: {env: HOST_VAR}", "literal tokens are pointed out")
}

// TestImportLayers: several files import as one document, a later file replacing a
// server of the same id in place, as layered --config files do.
func TestImportLayers(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"global.json":  `{"mcpServers": {"fs": {"command": "npx", "args": ["fs"]}, "search": {"command": "uvx", "args": ["s"]}}}`,
		"project.yaml": "version: 1\nlimits: {max_concurrent: 4}\nservers:\n  search: {url: 'https://search.example.com/mcp'}\n  extra: {command: extra}\n",
	})
	files := []string{filepath.Join(dir, "global.json"), filepath.Join(dir, "project.yaml")}
	want, problems := Load(files, nil)
	require.NotNil(t, want, render(problems))
	path, out := importBeside(t, files...)
	got, problems := Load([]string{path}, nil)
	require.NotNil(t, got, render(problems))
	assert.Equal(t, idsAndHashes(want), idsAndHashes(got), "%s", out)
	var ids []string
	for _, s := range got.Servers {
		ids = append(ids, s.ID)
	}
	assert.Equal(t, []string{"fs", "search", "extra"}, ids)
	assert.Equal(t, 4, got.Limits.MaxConcurrent)
}

func TestImportUnreadable(t *testing.T) {
	out, problems := Import([]ImportFile{{Name: "a.json", Data: []byte(`{"theme": "dark"}`)}, {Name: "b.json", Data: []byte(`{"mcpServers": {"x": {"command": "y"}}}`)}})
	assert.True(t, HasErrors(problems))
	assert.Contains(t, render(problems), "a.json:1: not a config mcp-aggregator can read")
	assert.Contains(t, string(out), "a.json (not read: see the errors)")
	assert.Contains(t, string(out), "\n  x:\n")
}

// TestImportEndsWithNewline: the YAML import prints ends with a newline, so that what
// follows it (the warnings on stderr, in a terminal) starts on a line of its own, and
// every value reads back as it was, even one with a line break YAML 1.1 knows beyond
// \n (next line, line and paragraph separators), which the encoder wrote raw.
func TestImportEndsWithNewline(t *testing.T) {
	for _, value := range []string{"plain", "two\nlines", "ends\n", "x\n\u2028", "a\u2029", "b\u0085", "\u2028"} {
		t.Run(fmt.Sprintf("%q", value), func(t *testing.T) {
			src, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
				"a": map[string]any{"command": "x", "env": map[string]string{"K" + value: value}, "args": []string{value}},
			}})
			require.NoError(t, err)
			out, problems := Import([]ImportFile{{Name: "a.json", Data: src}})
			require.NotNil(t, out, render(problems))
			assert.True(t, strings.HasSuffix(string(out), "\n"), "%q", out)
			ws, problems := LoadBytes("mcp-aggregator.yaml", out, nil)
			require.NotNil(t, ws, "%s\n%s", render(problems), out)
			require.Len(t, ws.Servers, 1, "%s\n%s", render(problems), out)
			assert.Equal(t, map[string]string{"K" + value: value}, ws.Servers[0].Env, "%q", out)
			assert.Equal(t, []string{value}, ws.Servers[0].Args, "%q", out)
		})
	}
}

// TestImportWritesServersOneByOne: the servers, encoded one at a time and indented in
// place, read exactly as the one document the encoder would write for them all, with
// values and comments (a source's server name) of every kind of text and line break.
func TestImportWritesServersOneByOne(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	chars := []rune("ab  \n\n\t\"'#:-{}[]|>&*!%@`,?\\\u00e9\r\u2028\u0085x")
	text := func() string {
		rs := make([]rune, rng.Intn(100))
		for i := range rs {
			rs[i] = chars[rng.Intn(len(chars))]
		}
		return string(rs)
	}
	for i := range 300 {
		servers := map[string]any{}
		for range i % 4 { // none, in the first round
			servers[text()] = map[string]any{"command": text(), "args": []string{text(), strings.Repeat("w ", rng.Intn(60))}, "env": map[string]string{text(): text()}}
		}
		data, err := json.Marshal(map[string]any{"mcpServers": servers})
		require.NoError(t, err)
		root, err := decodeJSON(data)
		require.NoError(t, err)
		list := mappingNode(1)
		importServers(list, map[string]int{}, translateClients(DialectMCPServers, fileContext{file: "a.json", dir: "/"}, root), "a.json", nil, map[string]Origin{})
		settings := mappingNode(1)
		addPair(settings, "version", 1, scalarNode("1", "!!int", 1))
		settings.HeadComment = "written by import"

		got, err := encodeConfig(settings, list)
		require.NoError(t, err)
		whole := mappingNode(1)
		whole.HeadComment = settings.HeadComment
		whole.Content = append(append(whole.Content, settings.Content...), scalarNode("servers", "!!str", 1), list)
		var want bytes.Buffer
		require.NoError(t, encodeYAML(&want, tidy(whole)))
		require.Equal(t, want.String(), string(got))
	}
}
