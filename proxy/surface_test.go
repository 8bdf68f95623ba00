package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

func surfaceServer(id string, cfg func(*config.Server), uris, templates, prompts []string) *runningServer {
	s := &config.Server{ID: id}
	if cfg != nil {
		cfg(s)
	}
	rs := &runningServer{cfg: s, caps: upstream.Capabilities{Resources: len(uris)+len(templates) > 0, Prompts: len(prompts) > 0}}
	for _, u := range uris {
		rs.resources = append(rs.resources, upstream.Resource{URI: u, Raw: json.RawMessage(`{"uri":"` + u + `","name":"` + u + `","x-extra":[1]}`)})
	}
	for _, t := range templates {
		rs.templates = append(rs.templates, upstream.ResourceTemplate{URITemplate: t, Raw: json.RawMessage(`{"uriTemplate":"` + t + `","name":"t"}`)})
	}
	for _, p := range prompts {
		rs.prompts = append(rs.prompts, upstream.Prompt{Name: p, Raw: json.RawMessage(`{"name":"` + p + `","description":"d","arguments":[{"name":"a"}]}`)})
	}
	return rs
}

func TestSurfaceOwnershipFiltersAndRenames(t *testing.T) {
	servers := map[string]*runningServer{
		"a": surfaceServer("a", func(s *config.Server) {
			s.Transforms = []config.Transform{{Kind: config.TransformPrefix, Add: "a_"}}
			s.Resources.Blacklist = []string{"secret://*"}
		}, []string{"file:///x", "secret://k"}, []string{"file:///{path}"}, []string{"greet", "bad name"}),
		"b": surfaceServer("b", func(s *config.Server) {
			s.Prompts.Whitelist = []string{"greet"}
		}, []string{"file:///x", "mem://y"}, []string{"mem://{id}"}, []string{"greet", "other"}),
	}
	s := buildSurface([]string{"a", "b"}, servers, "")

	owner, ok := s.resourceOwner("file:///x")
	require.True(t, ok)
	assert.Equal(t, "a", owner, "the first server in config order keeps a URI both list")
	_, ok = s.resourceOwner("secret://k")
	assert.False(t, ok, "a blacklisted URI is not exported")
	owner, _ = s.resourceOwner("mem://y")
	assert.Equal(t, "b", owner)
	owner, ok = s.resourceOwner("file:///some/where")
	require.True(t, ok, "a URI no one listed goes to the server whose template matches")
	assert.Equal(t, "a", owner)
	owner, _ = s.resourceOwner("mem://42")
	assert.Equal(t, "b", owner)
	_, ok = s.resourceOwner("nothing://at/all")
	assert.False(t, ok)

	var resources []map[string]any
	require.NoError(t, json.Unmarshal(s.resourcesJSON, &resources))
	assert.Len(t, resources, 2, "file:///x once, mem://y")
	assert.Equal(t, []any{float64(1)}, resources[0]["x-extra"], "definitions pass whole")

	require.Contains(t, s.prompts, "a_greet")
	assert.Equal(t, "greet", s.prompts["a_greet"].original)
	require.Contains(t, s.prompts, "greet", "b's greet is not renamed and does not collide with a_greet")
	assert.NotContains(t, s.prompts, "other", "b's prompts whitelist admits greet only")
	assert.NotContains(t, s.prompts, "a_bad name", "invalid names are skipped")
	var prompts []map[string]any
	require.NoError(t, json.Unmarshal(s.promptsJSON, &prompts))
	assert.Equal(t, "a_greet", prompts[0]["name"])

	assert.True(t, s.caps.resources)
	assert.True(t, s.caps.prompts)
	assert.False(t, s.caps.subscribe)
	assert.NotEmpty(t, s.problems, "the shared URI is reported")

	r, tp, pr := s.Counts("a")
	assert.Equal(t, []int{1, 1, 1}, []int{r, tp, pr})
}

func TestReplaced(t *testing.T) {
	out, err := replaced(json.RawMessage(`{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":"b"}}`), "ref", json.RawMessage(`{"type":"ref/prompt","name":"y"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"ref":{"type":"ref/prompt","name":"y"},"argument":{"name":"a","value":"b"}}`, string(out))
}

// TestSurfaceResultsAreShared: each list is rendered once inside its whole
// result, with no room for an append to write into either.
func TestSurfaceResultsAreShared(t *testing.T) {
	s := emptySurface()
	s.render(json.RawMessage(`[{"uri":"a://1"}]`), json.RawMessage(`[]`), json.RawMessage(`[{"name":"p"}]`))
	assert.Equal(t, `{"resources":[{"uri":"a://1"}]}`, string(s.results[listResources]))
	assert.Equal(t, `{"resourceTemplates":[]}`, string(s.results[listTemplates]))
	assert.Equal(t, `{"prompts":[{"name":"p"}]}`, string(s.results[listPrompts]))
	assert.Equal(t, `[{"uri":"a://1"}]`, string(s.resourcesJSON))
	assert.Equal(t, `[{"name":"p"}]`, string(s.promptsJSON))
	for _, b := range []json.RawMessage{s.resourcesJSON, s.templatesJSON, s.promptsJSON, s.results[listResources]} {
		assert.Equal(t, len(b), cap(b))
	}
}
