package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tool(server, name, desc string, params ...string) Tool {
	props := map[string]any{}
	for _, p := range params {
		props[p] = map[string]any{"type": "string", "description": "The " + p}
	}
	raw, _ := json.Marshal(map[string]any{"name": name, "description": desc,
		"inputSchema": map[string]any{"type": "object", "properties": props}})
	return Tool{Name: name, Server: server, Raw: raw}
}

func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Tool.Name
	}
	return out
}

func smallCatalog() []Tool {
	return []Tool{
		tool("fs", "fs_read_file", "Read the complete contents of a file from the file system.", "path"),
		tool("fs", "fs_write_file", "Create a new file or overwrite an existing file with new content.", "path", "content"),
		tool("fs", "fs_list_directory", "List the files and directories in a path.", "path"),
		tool("github", "github_create_issue", "Create a new issue in a GitHub repository.", "owner", "repo", "title", "body"),
		tool("github", "github_search_code", "Search for code across GitHub repositories.", "q"),
		tool("web", "web_fetch", "Fetch a URL and return the page as markdown; it reads the file behind a link.", "url"),
		tool("web", "browser_take_screenshot", "Take a screenshot of the current page.", "fullPage"),
	}
}

func TestSearchRanksByMeaning(t *testing.T) {
	ix := Build(smallCatalog())
	tests := []struct {
		query string
		first string
	}{
		{"read a file", "fs_read_file"},
		{"open an issue on github", "github_create_issue"},
		{"capture the page as an image screenshot", "browser_take_screenshot"},
		{"what is in this folder (directories)", "fs_list_directory"},
		{"download a web page", "web_fetch"},
		{"owner repo title", "github_create_issue"}, // parameter names count
	}
	for _, tt := range tests {
		hits := ix.Search(Query{Text: tt.query})
		require.NotEmpty(t, hits, tt.query)
		assert.Equal(t, tt.first, hits[0].Tool.Name, "%q: %v", tt.query, names(hits))
	}
}

func TestSearchNameMatchesComeFirst(t *testing.T) {
	ix := Build(smallCatalog())
	for query, want := range map[string]string{
		"fs_read_file":          "fs_read_file",        // exact
		"FS_READ_FILE":          "fs_read_file",        // case aside
		"write file":            "fs_write_file",       // the end of the name
		"fs_raed_file":          "fs_read_file",        // a typo
		"githb_create_isue":     "github_create_issue", // two typos in a long name
		"browserTakeScreenshot": "browser_take_screenshot",
	} {
		hits := ix.Search(Query{Text: query})
		require.NotEmpty(t, hits, query)
		assert.Equal(t, want, hits[0].Tool.Name, "%q: %v", query, names(hits))
	}
	// A sentence is never taken for a misspelt name.
	hits := ix.Search(Query{Text: "read fiel"})
	for _, h := range hits {
		assert.Less(t, h.Score, tierBoost, "%q matched %s by name", "read fiel", h.Tool.Name)
	}
}

func TestSearchOriginalName(t *testing.T) {
	ix := Build([]Tool{
		{Name: "mcp__fs__read_file", Original: "read_file", Server: "fs", Raw: json.RawMessage(`{"name":"mcp__fs__read_file","description":"Read a file"}`)},
		{Name: "mcp__fs__read_file_lines", Original: "read_file_lines", Server: "fs", Raw: json.RawMessage(`{"name":"mcp__fs__read_file_lines","description":"Read a file, some lines of it"}`)},
	})
	assert.Equal(t, []string{"mcp__fs__read_file", "mcp__fs__read_file_lines"}, names(ix.Search(Query{Text: "read_file"})))
}

func TestSearchLimitsAndVisibility(t *testing.T) {
	ix := Build(smallCatalog())
	assert.Len(t, ix.Search(Query{Text: "file"}), 4, "every tool that mentions files, no more")
	assert.Len(t, ix.Search(Query{Text: "file", Limit: 2}), 2)
	assert.Len(t, ix.Search(Query{Text: "file path content directory url page", Limit: 0}), DefaultLimit)

	hidden := ix.Search(Query{Text: "read file", Visible: func(name string) bool { return name != "fs_read_file" }})
	assert.NotContains(t, names(hidden), "fs_read_file", "a tool the client may not see is never found")
	assert.NotEmpty(t, hidden)

	assert.Empty(t, ix.Search(Query{Text: "   "}))
	assert.Empty(t, ix.Search(Query{Text: "zebra quantum"}))
	assert.Empty(t, Build(nil).Search(Query{Text: "file"}))
}

func TestSearchPrefixOfUnknownWord(t *testing.T) {
	ix := Build(smallCatalog())
	// "direct" is in no tool, but "directories" starts with it.
	hits := ix.Search(Query{Text: "direct"})
	require.NotEmpty(t, hits)
	assert.Equal(t, "fs_list_directory", hits[0].Tool.Name)
}

func TestSearchTiesKeepCatalogOrder(t *testing.T) {
	var tools []Tool
	for i := range 8 {
		tools = append(tools, tool("s", fmt.Sprintf("twin_%d", i), "Exactly the same words."))
	}
	ix := Build(tools)
	assert.Equal(t, []string{"twin_0", "twin_1", "twin_2"}, names(ix.Search(Query{Text: "same words", Limit: 3})))
}

func TestHitCarriesTheDefinition(t *testing.T) {
	raw := json.RawMessage(`{"name":"t","title":"A title","description":"Does x","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":12345678901234567890}}},"annotations":{"title":"Other"}}`)
	ix := Build([]Tool{{Name: "t", Server: "s", Raw: raw}, {Name: "bare", Server: "s", Raw: json.RawMessage(`{"name":"bare"}`)}, {Name: "junk", Server: "s", Raw: json.RawMessage(`[1,2`)}})
	hits := ix.Search(Query{Text: "t"})
	require.Len(t, hits, 1)
	assert.Equal(t, "A title", hits[0].Title)
	assert.Equal(t, "Does x", hits[0].Description)
	assert.Equal(t, `{"type":"object","properties":{"n":{"type":"integer","maximum":12345678901234567890}}}`, string(hits[0].InputSchema), "the schema's own bytes")

	bare := ix.Search(Query{Text: "bare"})
	require.Len(t, bare, 1)
	assert.Equal(t, `{"type":"object"}`, string(bare[0].InputSchema))
	assert.Len(t, ix.Search(Query{Text: "junk"}), 1, "a malformed definition is still found by its name")
}

func TestSearchParameterWords(t *testing.T) {
	ix := Build([]Tool{
		{Name: "a", Server: "s", Raw: json.RawMessage(`{"name":"a","description":"Does a thing","inputSchema":{"type":"object","properties":{"options":{"type":"object","properties":{"latitude":{"type":"number","description":"Degrees north"}}}}}}`)},
		{Name: "b", Server: "s", Raw: json.RawMessage(`{"name":"b","description":"Does another thing"}`)},
	})
	assert.Equal(t, []string{"a"}, names(ix.Search(Query{Text: "latitude"})), "nested property names")
	assert.Equal(t, []string{"a"}, names(ix.Search(Query{Text: "degrees north"})), "property descriptions")
}

func TestRebuildEqualsBuild(t *testing.T) {
	tools := loadCatalog(t)
	prev := Build(tools)

	// The next catalog: some tools gone, some changed, one added, the
	// order changed, and the unchanged ones in fresh copies of their bytes.
	var next []Tool
	for i, tool := range tools {
		switch {
		case i%17 == 0:
			continue // gone
		case i%13 == 0:
			tool.Raw = bytes.Replace(tool.Raw, []byte(`"description":"`), []byte(`"description":"Changed: `), 1)
		case i%11 == 0:
			tool.Server += "x"
		default:
			tool.Raw = bytes.Clone(tool.Raw)
		}
		next = append(next, tool)
	}
	next = append(next, Tool{Name: "brand_new_tool", Server: "brand", Raw: json.RawMessage(`{"name":"brand_new_tool","description":"Polish the brass","inputSchema":{"type":"object","properties":{"cloth":{"type":"string"}}}}`)})
	next[0], next[len(next)-1] = next[len(next)-1], next[0]

	want := Build(next)
	got := Rebuild(prev, next)
	assert.Equal(t, want.postings, got.postings)
	assert.Equal(t, want.vocab, got.vocab)
	assert.Equal(t, want.avgLen, got.avgLen)
	require.Len(t, got.docs, len(want.docs))
	for i := range want.docs {
		assert.Equal(t, want.docs[i], got.docs[i], "doc %d (%s)", i, next[i].Name)
		// A reused doc's input schema lies in the new catalog's bytes.
		raw, schema := next[i].Raw, got.docs[i].hit.InputSchema
		if len(schema) > 0 && &schema[0] != &emptySchema[0] {
			start := cap(raw) - cap(schema)
			assert.True(t, start >= 0 && start < len(raw) && &raw[start] == &schema[0], "doc %d's schema is in its own definition", i)
		}
	}
	for _, q := range []string{"read a file", "create an issue", "polish brass"} {
		assert.Equal(t, want.Search(Query{Text: q}), got.Search(Query{Text: q}), q)
	}

	// Reused twice over: the schema is still found in the newest bytes.
	again := make([]Tool, len(next))
	for i, tool := range next {
		tool.Raw = bytes.Clone(tool.Raw)
		again[i] = tool
	}
	third := Rebuild(got, again)
	for i := range third.docs {
		assert.JSONEq(t, string(want.docs[i].hit.InputSchema), string(third.docs[i].hit.InputSchema), "doc %d", i)
	}
}
