package listing

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInert(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, ünïcödé and emoji 🙂", "plain text, ünïcödé and emoji 🙂"},
		{"clear\x1b[2Jscreen", `clear\x1b[2Jscreen`},
		{"tab\tand\rreturn", `tab\tand\rreturn`},
		{"bell\a nul\x00 del\x7f", `bell\x07 nul\x00 del\x7f`},
		{"C1 CSI \u009b31m", `C1 CSI \u009b31m`},
		{"a\nb", `a\x0ab`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, inert(tt.in), "%q", tt.in)
	}
	assert.Equal(t, "line \\x1b]52;c;x\\x07\nnext\\x1b", inertLines("line \x1b]52;c;x\a\nnext\x1b"), "line breaks stay")
}

func TestProblems(t *testing.T) {
	problems := []config.Problem{
		{Severity: config.SeverityError, File: "a.yaml", Line: 3, Server: "s", Field: "command", Message: "missing"},
		{Severity: config.SeverityWarning, Server: "t", Message: "the upstream said \x1b[2Jhi\nover two lines"},
		{Severity: config.SeverityWarning, Message: "plain"},
	}
	var buf bytes.Buffer
	errs, warns := Problems(&buf, problems)
	assert.Equal(t, 1, errs)
	assert.Equal(t, 2, warns)
	assert.Equal(t, `error: a.yaml:3: server "s": command: missing
warning: server "t": the upstream said \x1b[2Jhi
over two lines
warning: plain
`, buf.String())

	buf.Reset()
	errs, warns = Problems(&buf, nil)
	assert.Zero(t, errs+warns)
	assert.Empty(t, buf.String())
}

func entries() []*catalog.Entry {
	return []*catalog.Entry{
		{Exported: "fs_read", Server: "fs", Original: "read", Raw: json.RawMessage(`{"name":"fs_read","description":"  Read a file.\nMore detail.","x-vendor":{"a":1}}`)},
		{Exported: "web_get", Server: "web", Original: "get", Raw: json.RawMessage(`{"name":"web_get","description":"Fetch <a> page\u001b[2J"}`)},
		{Exported: "bare", Server: "web", Original: "bare", Raw: json.RawMessage(`{"name":"bare"}`)},
	}
}

func TestNewCatalog(t *testing.T) {
	c := NewCatalog(entries(), nil, nil)
	require.Len(t, c.Tools, 3)
	assert.Equal(t, Tool{Name: "fs_read", Server: "fs", Original: "read", Description: "Read a file.",
		Definition: json.RawMessage(`{"name":"fs_read","description":"  Read a file.\nMore detail.","x-vendor":{"a":1}}`)}, c.Tools[0])
	assert.Equal(t, "Fetch <a> page\x1b[2J", c.Tools[1].Description, "kept as it is; made inert where printed")
	assert.Empty(t, c.Tools[2].Description)
}

func TestCatalogErrors(t *testing.T) {
	tests := []struct {
		name     string
		problems []config.Problem
		want     int
	}{
		{"none", nil, 0},
		{"warnings only", []config.Problem{{Severity: config.SeverityWarning}}, 0},
		{"errors and warnings", []config.Problem{{Severity: config.SeverityError}, {Severity: config.SeverityWarning}, {Severity: config.SeverityError}}, 2},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Catalog{Problems: tt.problems}.Errors(), tt.name)
	}
}

func TestCatalogWriteJSON(t *testing.T) {
	problems := []config.Problem{{Severity: config.SeverityError, Server: "x", Message: "cannot start"}}
	var buf bytes.Buffer
	require.NoError(t, NewCatalog(entries(), problems, []string{"a note"}).WriteJSON(&buf))
	assert.JSONEq(t, `{
  "tools": [
    {"name": "fs_read", "server": "fs", "original": "read", "description": "Read a file.",
     "definition": {"name":"fs_read","description":"  Read a file.\nMore detail.","x-vendor":{"a":1}}},
    {"name": "web_get", "server": "web", "original": "get", "description": "Fetch <a> page\u001b[2J",
     "definition": {"name":"web_get","description":"Fetch <a> page\u001b[2J"}},
    {"name": "bare", "server": "web", "original": "bare", "description": "", "definition": {"name":"bare"}}
  ],
  "problems": ["error: server \"x\": cannot start"],
  "notes": ["a note"]
}`, buf.String())
	assert.Contains(t, buf.String(), `"Fetch <a> page`, "no HTML escaping: definitions read as their servers wrote them")

	// Nothing at all: empty lists of problems and notes, no tools.
	buf.Reset()
	require.NoError(t, NewCatalog(nil, nil, nil).WriteJSON(&buf))
	assert.JSONEq(t, `{"tools": null, "problems": [], "notes": []}`, buf.String())
}

func TestCatalogWriteTable(t *testing.T) {
	tests := []struct {
		name    string
		catalog Catalog
		want    string
	}{
		{"tools only", NewCatalog(entries(), nil, nil), `TOOL     SERVER  ORIGINAL  DESCRIPTION
fs_read  fs      read      Read a file.
web_get  web     get       Fetch <a> page\x1b[2J
bare     web     bare      
`},
		{"no tools, a problem and a note", NewCatalog(nil, []config.Problem{{Severity: config.SeverityWarning, Server: "x", Message: "slow\x07"}}, []string{"note\x1b one\ntwo"}), `TOOL  SERVER  ORIGINAL  DESCRIPTION

warning: server "x": slow\x07
note: note\x1b one
two
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tt.catalog.WriteTable(&buf))
			assert.Equal(t, tt.want, buf.String())
			assert.False(t, strings.ContainsRune(buf.String(), 0x1b), "no escape reaches the terminal")
		})
	}
}
