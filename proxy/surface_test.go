package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// The surface is built from what the running servers declared and listed,
// in the order given; a server no longer running is left out.
func TestBuildSurfaceFromRunningServers(t *testing.T) {
	servers := map[string]*runningServer{
		"a": {cfg: &config.Server{ID: "a"}, caps: upstream.Capabilities{Resources: true, ResourcesSubscribe: true, Completions: true},
			resources: []upstream.Resource{{URI: "file:///x", Raw: json.RawMessage(`{"uri":"file:///x","name":"a"}`)}},
			templates: []upstream.ResourceTemplate{{URITemplate: "file:///{p}", Raw: json.RawMessage(`{"uriTemplate":"file:///{p}","name":"t"}`)}}},
		"b": {cfg: &config.Server{ID: "b"}, caps: upstream.Capabilities{Resources: true, Prompts: true, Logging: true},
			resources: []upstream.Resource{{URI: "file:///x", Raw: json.RawMessage(`{"uri":"file:///x","name":"b"}`)}},
			prompts:   []upstream.Prompt{{Name: "greet", Raw: json.RawMessage(`{"name":"greet"}`)}}},
	}
	s := buildSurface([]string{"b", "gone", "a"}, servers, "", nil)
	owner, ok := s.ResourceOwner("file:///x")
	require.True(t, ok)
	assert.Equal(t, "b", owner, "the order given decides who keeps a URI")
	assert.JSONEq(t, `[{"uri":"file:///x","name":"b"}]`, string(s.List(catalog.ListResources)))
	assert.JSONEq(t, `[{"uriTemplate":"file:///{p}","name":"t"}]`, string(s.List(catalog.ListTemplates)))
	assert.JSONEq(t, `[{"name":"greet"}]`, string(s.List(catalog.ListPrompts)))
	o := s.Offers()
	assert.Equal(t, catalog.Offers{Resources: true, Subscribe: true, Prompts: true, Completions: true, Logging: true,
		ResourceServers: []string{"b", "a"}, SubscribeServers: []string{"a"}}, o)
}

func TestReplaced(t *testing.T) {
	out, err := replaced(json.RawMessage(`{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":"b"}}`), "ref", json.RawMessage(`{"type":"ref/prompt","name":"y"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"ref":{"type":"ref/prompt","name":"y"},"argument":{"name":"a","value":"b"}}`, string(out))
}
