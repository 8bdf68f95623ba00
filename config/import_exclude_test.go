package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportExclude: an excluded server is left out of every file that defines
// it, with its notes, and the header says so; a name no server is read as is an
// error; Origins says where each written server comes from.
func TestImportExclude(t *testing.T) {
	files := []ImportFile{
		{Name: "dir/a.json", Data: []byte("{\"mcpServers\": {\n  \"keep\": {\"command\": \"npx\"},\n  \"Broken One\": {\"args\": [\"x\"]}\n}}\n")},
		{Name: "dir/b.json", Data: []byte("{\"mcpServers\": {\n  \"Broken-One\": {\"args\": [\"y\"]},\n\n  \"web\": {\"url\": \"https://example.com/mcp\"}\n}}\n")},
	}
	r := ImportWith(files, ImportOptions{Exclude: []string{"Broken-One", "Broken-One"}})
	require.NotNil(t, r.YAML, render(r.Problems))
	assert.Empty(t, r.Problems, "the notes of the excluded server go with it")
	ws, problems := LoadBytes("dir/mcp-aggregator.yaml", r.YAML, envOf(nil))
	require.NotNil(t, ws, render(problems))
	var ids []string
	for _, s := range ws.Servers {
		ids = append(ids, s.ID)
	}
	assert.Equal(t, []string{"keep", "web"}, ids)
	assert.Contains(t, string(r.YAML), "#   left out: Broken-One (--exclude)\n")
	assert.Equal(t, 1, strings.Count(string(r.YAML), "left out: Broken-One"), "said once")
	assert.Equal(t, map[string]Origin{"keep": {"dir/a.json", 2, "keep"}, "web": {"dir/b.json", 4, "web"}}, r.Origins)

	r = ImportWith(files, ImportOptions{Exclude: []string{"Broken One"}})
	require.NotNil(t, r.YAML)
	p := problemAt(t, r.Problems, "--exclude")
	assert.Equal(t, SeverityError, p.Severity)
	assert.Equal(t, `no server of the files is read as "Broken One"; name a server by the id it is read as, which problems and comments give`, p.Message)
	assert.Equal(t, "dir/b.json line 2", r.Origins["Broken-One"].String(), "the last file's definition")

	out, problems := Import(files)
	r = ImportWith(files, ImportOptions{})
	assert.Equal(t, out, r.YAML)
	assert.Equal(t, problems, r.Problems)
}

// TestImportServerDefinedTwice: a server a file defines twice, which loading the
// file refuses, is an error of the import, at the second definition, not a
// silent replacement of the first; excluded, it is left out without one. A
// server a later file defines again replaces the earlier one, as --config
// layers do.
func TestImportServerDefinedTwice(t *testing.T) {
	for _, tt := range []struct {
		name, text    string
		first, second int
	}{
		{"a.json", "{\"mcpServers\": {\n  \"a\": {\"command\": \"sh\"},\n  \"a\": {\"command\": \"bash\"}\n}}\n", 2, 3},
		{"a.yaml", "version: 1\nservers:\n  a: {command: sh}\n  a: {command: bash}\n", 3, 4},
	} {
		r := ImportWith([]ImportFile{{Name: tt.name, Data: []byte(tt.text)}}, ImportOptions{})
		assert.Equal(t, Problem{Severity: SeverityError, File: tt.name, Line: tt.second, Server: "a",
			Message: fmt.Sprintf("defined again (first on line %d), which loading this file refuses; rename or remove one of them", tt.first)},
			problemAt(t, r.Problems, ""), tt.name)

		r = ImportWith([]ImportFile{{Name: tt.name, Data: []byte(tt.text)}}, ImportOptions{Exclude: []string{"a"}})
		assert.Empty(t, r.Problems, tt.name)
	}
	r := ImportWith([]ImportFile{
		{Name: "a.json", Data: []byte(`{"mcpServers": {"a": {"command": "sh"}}}`)},
		{Name: "b.json", Data: []byte(`{"mcpServers": {"a": {"command": "bash"}}}`)},
	}, ImportOptions{})
	assert.Empty(t, r.Problems)
	assert.Equal(t, map[string]Origin{"a": {"b.json", 1, "a"}}, r.Origins)
}

// TestImportReplacedByARenamedServer: a later file's server that replaces an earlier
// one of the same id, when one of the two was renamed to that id, is warned about:
// the two are likely different servers.
func TestImportReplacedByARenamedServer(t *testing.T) {
	r := ImportWith([]ImportFile{
		{Name: "a.json", Data: []byte("{\"mcpServers\": {\n  \"Brave Search\": {\"command\": \"sh\"}\n}}\n")},
		{Name: "b.json", Data: []byte("{\"mcpServers\": {\n\n  \"Brave-Search\": {\"command\": \"bash\"}\n}}\n")},
	}, ImportOptions{})
	require.NotNil(t, r.YAML)
	require.Len(t, r.Problems, 2, render(r.Problems))
	assert.Contains(t, r.Problems[0].Message, `"Brave Search" is not a valid server id here`, "the rename's own warning first")
	assert.Equal(t, Problem{Severity: SeverityWarning, File: "b.json", Line: 3, Server: "Brave-Search",
		Message: `"Brave-Search" replaces "Brave Search" of a.json line 2, both read as "Brave-Search"; rename one of them in its file to keep both`}, r.Problems[1])
	assert.Equal(t, Origin{"b.json", 3, "Brave-Search"}, r.Origins["Brave-Search"])

	// Named alike in both, it is the layering of one server: no warning.
	r = ImportWith([]ImportFile{
		{Name: "a.json", Data: []byte(`{"mcpServers": {"Brave Search": {"command": "sh"}}}`)},
		{Name: "b.json", Data: []byte(`{"mcpServers": {"Brave Search": {"command": "bash"}}}`)},
	}, ImportOptions{})
	require.Len(t, r.Problems, 2, render(r.Problems))
	for _, p := range r.Problems {
		assert.Contains(t, p.Message, "is not a valid server id here")
	}
}

// TestImportNotesInServerOrder: what the translation noticed of each server comes in
// the order of the servers, on one line as on many.
func TestImportNotesInServerOrder(t *testing.T) {
	for range 5 { // the order must not come from a map's
		r := ImportWith([]ImportFile{{Name: "a.json", Data: []byte(`{"mcpServers": {"Z z": {"command": "sh"}, "A a": {"command": "sh"}, "M m": {"command": "sh"}, "B b": {"command": "sh"}}}`)}}, ImportOptions{})
		var servers []string
		for _, p := range r.Problems {
			servers = append(servers, p.Server)
		}
		require.Equal(t, []string{"Z-z", "A-a", "M-m", "B-b"}, servers, render(r.Problems))
	}
}
