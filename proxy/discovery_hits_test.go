package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/discovery"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// hitsJSONByHand is how mcp_search_tools' structured result was written
// before rawjson built it: the reference its output must still match, byte
// for byte.
func hitsJSONByHand(hits []discovery.Hit) []byte {
	b := []byte(`{"tools":[`)
	for i, h := range hits {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = rawjson.AppendString(b, h.Tool.Name)
		b = append(b, `,"description":`...)
		b = rawjson.AppendString(b, h.Description)
		b = append(b, `,"inputSchema":`...)
		b = append(b, h.InputSchema...)
		b = append(b, `,"server":`...)
		b = rawjson.AppendString(b, h.Tool.Server)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func TestHitsJSONAsBefore(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "discovery", "testdata", "catalog.json"))
	require.NoError(t, err)
	var file struct {
		Tools []discovery.Tool `json:"tools"`
	}
	var raw struct {
		Tools []struct {
			Definition json.RawMessage `json:"definition"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	require.NoError(t, json.Unmarshal(data, &raw))
	for i := range file.Tools {
		file.Tools[i].Raw = raw.Tools[i].Definition
	}
	catalogs := map[string][]discovery.Tool{
		"the benchmark catalog": file.Tools,
		"written by hand": {
			{Name: "fs_read", Server: "fs", Raw: json.RawMessage(`{"name":"fs_read","description":"Read a file <b>&</b> \u00e9t\u00e9 \"quoted\"\n\nmore","inputSchema": { "type" : "object", "properties":{"path":{"type":"string","description":"<path>"}}, "required":["path"] } }`)},
			{Name: "fs_list", Server: "fs", Raw: json.RawMessage(`{"name":"fs_list","description":"List a directory"}`)},
			{Name: "web_fetch", Original: "fetch", Server: "web\u2028", Raw: json.RawMessage(`{"name":"web_fetch","description":"Fetch a URL\u0000","inputSchema":{"type":"object","properties":{"url":{"type":["string","null"]}},"additionalProperties":false}}`)},
		},
		"empty": nil,
	}
	for name, tools := range catalogs {
		t.Run(name, func(t *testing.T) {
			ix := discovery.Build(tools)
			for _, q := range []string{"read a file", "list", "fetch url", "search issues", "create", "no such thing at all"} {
				hits := ix.Search(discovery.Query{Text: q, Limit: maxSearchLimit})
				got, want := hitsJSON(hits), hitsJSONByHand(hits)
				assert.Equal(t, string(want), string(got), "query %q", q)
				require.True(t, json.Valid(got), "query %q: %s", q, got)
				assert.JSONEq(t, string(want), string(got), "query %q", q)
			}
		})
	}
}
