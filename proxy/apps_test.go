package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// The ui:// URIs of what resources/read answers are the exported ones.
func TestAppContents(t *testing.T) {
	resp := &jsonrpc.Message{Result: json.RawMessage(`{"contents":[{"uri":"ui://main","mimeType":"text/html;profile=mcp-app","text":"<p>","_meta":{"ui":{"prefersBorder":true}}},{"uri":"file:///x","text":""}],"_meta":{"k":1}}`)}
	got := appContents("srv", resp)
	assert.JSONEq(t, `{"contents":[{"uri":"ui://srv/main","mimeType":"text/html;profile=mcp-app","text":"<p>","_meta":{"ui":{"prefersBorder":true}}},{"uri":"file:///x","text":""}],"_meta":{"k":1}}`, string(got.Result))
	assert.Contains(t, string(resp.Result), `"ui://main"`, "the upstream's result is not written to")
}

// Two servers that serve the same ui:// URI each export it under a name
// of their own, and each name leads back to its server; an app URI never
// falls to another server.
func TestSurfaceAppResources(t *testing.T) {
	servers := map[string]*runningServer{
		"a": surfaceServer("a", nil, []string{"ui://get-time/mcp-app.html"}, nil, nil),
		"b": surfaceServer("b", nil, []string{"ui://get-time/mcp-app.html", "file:///b"}, []string{"ui://tpl/{id}"}, nil),
	}
	s := buildSurface([]string{"a", "b"}, servers, "")
	assert.Empty(t, s.problems, "the app resources do not collide")
	var listed []map[string]any
	require.NoError(t, json.Unmarshal(s.resourcesJSON, &listed))
	var uris []any
	for _, r := range listed {
		uris = append(uris, r["uri"])
	}
	assert.Equal(t, []any{"ui://a/get-time/mcp-app.html", "ui://b/get-time/mcp-app.html", "file:///b"}, uris)
	assert.JSONEq(t, `[{"uriTemplate":"ui://b/tpl/{id}","name":"t"}]`, string(s.templatesJSON))
	for uri, want := range map[string]string{"ui://a/get-time/mcp-app.html": "a", "ui://b/get-time/mcp-app.html": "b", "ui://b/tpl/7": "b"} {
		owner, ok := s.resourceOwner(uri)
		assert.True(t, ok, uri)
		assert.Equal(t, want, owner, uri)
	}
	for _, uri := range []string{"ui://get-time/mcp-app.html", "ui://c/x"} {
		_, ok := s.resourceOwner(uri)
		assert.False(t, ok, "%s names no server of this surface", uri)
	}

	hidden := buildSurfaceHiding([]string{"a", "b"}, servers, "", map[string]bool{"ui://a/get-time/mcp-app.html": true})
	assert.NotContains(t, string(hidden.resourcesJSON), "ui://a/")
	_, ok := hidden.resourceOwner("ui://a/get-time/mcp-app.html")
	assert.False(t, ok, "a hidden app resource cannot be read either")
}

// A profile that hides every tool pointing at an app resource hides the
// resource; one tool it admits keeps it.
func TestHiddenApps(t *testing.T) {
	cat := catalog.Empty().WithServer("a", []*catalog.Entry{
		{Exported: "a_one", Server: "a", App: "ui://a/one"},
		{Exported: "a_two", Server: "a", App: "ui://a/shared"},
		{Exported: "a_three", Server: "a", App: "ui://a/shared"},
		{Exported: "a_plain", Server: "a"},
	})
	st := &state{catalog: cat}
	assert.Nil(t, st.hiddenApps(&profile{}), "a profile without tool patterns hides no app")
	assert.Equal(t, map[string]bool{"ui://a/one": true}, st.hiddenApps(&profile{tools: []string{"a_three", "a_plain"}}))
}

// Extensions merge across servers: any server's extension is offered,
// with the first server's settings and the members only later ones have;
// the tasks extension to sessionless clients only.
func TestMergeExtensions(t *testing.T) {
	var m map[string]json.RawMessage
	m = mergeExtensions(m, json.RawMessage(`{"io.modelcontextprotocol/ui":{},"com.example/x":{"a":1,"deep":{"k":[1]}}}`))
	m = mergeExtensions(m, json.RawMessage(`not json`))
	m = mergeExtensions(m, json.RawMessage(`{"com.example/x":{"a":2,"b":true},"org.other/y":{"z":null},"com.example/off":null,"io.modelcontextprotocol/tasks":{}}`))
	got, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"io.modelcontextprotocol/ui":{},"com.example/x":{"a":1,"b":true,"deep":{"k":[1]}},"org.other/y":{"z":null},"io.modelcontextprotocol/tasks":{}}`, string(got))
	assert.Nil(t, mergeExtensions(nil, nil))
	caps := offeredCapabilities(surfaceCaps{extensions: m}, false)
	assert.Contains(t, caps, "extensions")
	assert.Contains(t, caps["extensions"], TasksExtension, "the tasks extension is offered to sessionless clients")
	session := offeredCapabilities(surfaceCaps{extensions: m}, true)
	assert.NotContains(t, session["extensions"], TasksExtension, "not to a session: it has the core tasks capability")
	assert.Contains(t, session["extensions"], "io.modelcontextprotocol/ui")
	assert.Contains(t, m, TasksExtension, "the merged extensions stay as they are")
	assert.NotContains(t, offeredCapabilities(surfaceCaps{}, false), "extensions", "no server offers one: no extensions member")
}
