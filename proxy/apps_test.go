package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// The ui:// URIs of what resources/read answers are the exported ones.
func TestAppContents(t *testing.T) {
	resp := &jsonrpc.Message{Result: json.RawMessage(`{"contents":[{"uri":"ui://main","mimeType":"text/html;profile=mcp-app","text":"<p>","_meta":{"ui":{"prefersBorder":true}}},{"uri":"file:///x","text":""}],"_meta":{"k":1}}`)}
	got := appContents("srv", resp)
	assert.JSONEq(t, `{"contents":[{"uri":"ui://srv/main","mimeType":"text/html;profile=mcp-app","text":"<p>","_meta":{"ui":{"prefersBorder":true}}},{"uri":"file:///x","text":""}],"_meta":{"k":1}}`, string(got.Result))
	assert.Contains(t, string(resp.Result), `"ui://main"`, "the upstream's result is not written to")
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

// The extensions the servers declare are offered at initialize, but the
// tasks extension, which is offered to sessionless clients only.
func TestOfferedExtensions(t *testing.T) {
	s := catalog.NewSurface([]catalog.ServerLists{{Config: &config.Server{ID: "a"}, Declared: catalog.Declared{Extensions: json.RawMessage(`{"com.example/x":{"a":1},"io.modelcontextprotocol/tasks":{}}`)}}}, "", nil)
	caps := offeredCapabilities(s.Offers(), false)
	require.Contains(t, caps, "extensions")
	assert.Equal(t, map[string]json.RawMessage{"com.example/x": json.RawMessage(`{"a":1}`), TasksExtension: json.RawMessage(`{}`)}, caps["extensions"])
	session := offeredCapabilities(s.Offers(), true)
	assert.Equal(t, map[string]json.RawMessage{"com.example/x": json.RawMessage(`{"a":1}`)}, session["extensions"], "not to a session: it has the core tasks capability")
	assert.Contains(t, s.Offers().Extensions, TasksExtension, "the merged extensions stay as they are")
	assert.NotContains(t, offeredCapabilities(catalog.Offers{}, false), "extensions", "no server offers one: no extensions member")
}
