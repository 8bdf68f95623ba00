package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// lists makes one server's lists: resources, templates and prompts with
// definitions as an upstream sends them.
func lists(id string, cfg func(*config.Server), uris, templates, prompts []string) ServerLists {
	s := &config.Server{ID: id}
	if cfg != nil {
		cfg(s)
	}
	l := ServerLists{Config: s, Declared: Declared{Resources: len(uris)+len(templates) > 0, Prompts: len(prompts) > 0}}
	for _, u := range uris {
		l.Resources = append(l.Resources, Listed{Key: u, Raw: json.RawMessage(`{"uri":"` + u + `","name":"` + u + `","x-extra":[1]}`)})
	}
	for _, t := range templates {
		l.Templates = append(l.Templates, Listed{Key: t, Raw: json.RawMessage(`{"uriTemplate":"` + t + `","name":"t"}`)})
	}
	for _, p := range prompts {
		l.Prompts = append(l.Prompts, Listed{Key: p, Raw: json.RawMessage(`{"name":"` + p + `","description":"d","arguments":[{"name":"a"}]}`)})
	}
	return l
}

func TestSurfaceOwnershipFiltersAndRenames(t *testing.T) {
	s := NewSurface([]ServerLists{
		lists("a", func(s *config.Server) {
			s.Transforms = []config.Transform{{Kind: config.TransformPrefix, Add: "a_"}}
			s.Resources.Blacklist = []string{"secret://*"}
		}, []string{"file:///x", "secret://k"}, []string{"file:///{path}"}, []string{"greet", "bad name"}),
		lists("b", func(s *config.Server) {
			s.Prompts.Whitelist = []string{"greet"}
		}, []string{"file:///x", "mem://y"}, []string{"mem://{id}"}, []string{"greet", "other"}),
	}, "", nil)

	owner, ok := s.ResourceOwner("file:///x")
	require.True(t, ok)
	assert.Equal(t, "a", owner, "the first server in config order keeps a URI both list")
	_, ok = s.ResourceOwner("secret://k")
	assert.False(t, ok, "a blacklisted URI is not exported")
	owner, _ = s.ResourceOwner("mem://y")
	assert.Equal(t, "b", owner)
	owner, ok = s.ResourceOwner("file:///some/where")
	require.True(t, ok, "a URI no one listed goes to the server whose template matches")
	assert.Equal(t, "a", owner)
	owner, _ = s.ResourceOwner("mem://42")
	assert.Equal(t, "b", owner)
	_, ok = s.ResourceOwner("nothing://at/all")
	assert.False(t, ok)
	owner, ok = s.TemplateOwner("mem://{id}")
	assert.True(t, ok)
	assert.Equal(t, "b", owner)
	_, ok = s.TemplateOwner("mem://42")
	assert.False(t, ok, "a template is found by its own text only")

	assert.JSONEq(t, `[{"uri":"file:///x","name":"file:///x","x-extra":[1]},{"uri":"mem://y","name":"mem://y","x-extra":[1]}]`,
		string(s.List(ListResources)), "file:///x once, definitions whole")

	p, ok := s.Prompt("a_greet")
	require.True(t, ok)
	assert.Equal(t, Prompt{Exported: "a_greet", Original: "greet", Server: "a"}, p)
	owner, ok = s.PromptOwner("greet")
	require.True(t, ok, "b's greet is not renamed and does not collide with a_greet")
	assert.Equal(t, "b", owner)
	_, ok = s.Prompt("other")
	assert.False(t, ok, "b's prompts whitelist admits greet only")
	_, ok = s.Prompt("a_bad name")
	assert.False(t, ok, "invalid names are skipped")
	assert.JSONEq(t, `[{"name":"a_greet","description":"d","arguments":[{"name":"a"}]},{"name":"greet","description":"d","arguments":[{"name":"a"}]}]`,
		string(s.List(ListPrompts)))

	o := s.Offers()
	assert.True(t, o.Resources)
	assert.True(t, o.Prompts)
	assert.False(t, o.Subscribe)
	assert.Equal(t, []string{"a", "b"}, o.ResourceServers)
	assert.NotEmpty(t, s.Problems(), "the shared URI is reported")

	r, tp, pr := s.Counts("a")
	assert.Equal(t, []int{1, 1, 1}, []int{r, tp, pr})
}

// A server that alone offers resources, or subscriptions, is asked for a
// URI no one lists.
func TestSurfaceSoleServer(t *testing.T) {
	a := lists("a", nil, []string{"file:///a"}, nil, nil)
	a.Declared.Subscribe = true
	s := NewSurface([]ServerLists{a, lists("b", nil, []string{"file:///b"}, nil, nil)}, "", nil)
	_, ok := s.SoleServer(false)
	assert.False(t, ok, "two servers offer resources")
	server, ok := s.SoleServer(true)
	assert.True(t, ok)
	assert.Equal(t, "a", server, "a alone offers subscriptions")
}

// Two servers that serve the same ui:// URI each export it under a name
// of their own, and each name leads back to its server; an app URI never
// falls to another server.
func TestSurfaceAppResources(t *testing.T) {
	servers := []ServerLists{
		lists("a", nil, []string{"ui://get-time/mcp-app.html"}, nil, nil),
		lists("b", nil, []string{"ui://get-time/mcp-app.html", "file:///b"}, []string{"ui://tpl/{id}"}, nil),
	}
	s := NewSurface(servers, "", nil)
	assert.Empty(t, s.Problems(), "the app resources do not collide")
	var listed []map[string]any
	require.NoError(t, json.Unmarshal(s.List(ListResources), &listed))
	var uris []any
	for _, r := range listed {
		uris = append(uris, r["uri"])
	}
	assert.Equal(t, []any{"ui://a/get-time/mcp-app.html", "ui://b/get-time/mcp-app.html", "file:///b"}, uris)
	assert.JSONEq(t, `[{"uriTemplate":"ui://b/tpl/{id}","name":"t"}]`, string(s.List(ListTemplates)))
	for uri, want := range map[string]string{"ui://a/get-time/mcp-app.html": "a", "ui://b/get-time/mcp-app.html": "b", "ui://b/tpl/7": "b"} {
		owner, ok := s.ResourceOwner(uri)
		assert.True(t, ok, uri)
		assert.Equal(t, want, owner, uri)
	}
	for _, uri := range []string{"ui://get-time/mcp-app.html", "ui://c/x"} {
		_, ok := s.ResourceOwner(uri)
		assert.False(t, ok, "%s names no server of this surface", uri)
	}

	hidden := NewSurface(servers, "", map[string]bool{"ui://a/get-time/mcp-app.html": true})
	assert.NotContains(t, string(hidden.List(ListResources)), "ui://a/")
	_, ok := hidden.ResourceOwner("ui://a/get-time/mcp-app.html")
	assert.False(t, ok, "a hidden app resource cannot be read either")
}

// TestSurfaceResultsAreShared: each list is rendered once inside its whole
// result, with no room for an append to write into either.
func TestSurfaceResultsAreShared(t *testing.T) {
	s := NewSurface([]ServerLists{lists("a", nil, []string{"a://1"}, nil, []string{"p"})}, "", nil)
	assert.Equal(t, `{"resources":[{"uri":"a://1","name":"a://1","x-extra":[1]}]}`, string(s.Result(ListResources)))
	assert.Equal(t, `{"resourceTemplates":[]}`, string(s.Result(ListTemplates)))
	assert.Equal(t, `{"prompts":[{"name":"p","description":"d","arguments":[{"name":"a"}]}]}`, string(s.Result(ListPrompts)))
	assert.Equal(t, `[{"uri":"a://1","name":"a://1","x-extra":[1]}]`, string(s.List(ListResources)))
	for _, kind := range []string{ListResources, ListTemplates, ListPrompts} {
		for _, b := range []json.RawMessage{s.Result(kind), s.List(kind)} {
			assert.Equal(t, len(b), cap(b), kind)
		}
	}
	assert.Nil(t, s.Result("tools"), "tools are the catalog's")
	empty := EmptySurface()
	assert.Equal(t, `{"prompts":[]}`, string(empty.Result(ListPrompts)))
	assert.Empty(t, empty.Offers().ResourceServers)
}

func TestListsChanged(t *testing.T) {
	base := NewSurface([]ServerLists{lists("a", nil, []string{"a://1"}, nil, []string{"p"})}, "", nil)
	tests := []struct {
		name               string
		other              []ServerLists
		resources, prompts bool
	}{
		{"same lists", []ServerLists{lists("a", nil, []string{"a://1"}, nil, []string{"p"})}, false, false},
		{"a resource added", []ServerLists{lists("a", nil, []string{"a://1", "a://2"}, nil, []string{"p"})}, true, false},
		{"a template added", []ServerLists{lists("a", nil, []string{"a://1"}, []string{"a://{x}"}, []string{"p"})}, true, false},
		{"a prompt removed", []ServerLists{lists("a", nil, []string{"a://1"}, nil, nil)}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, prm := ListsChanged(base, NewSurface(tc.other, "", nil))
			assert.Equal(t, tc.resources, res)
			assert.Equal(t, tc.prompts, prm)
		})
	}
}

// Extensions merge across servers: any server's extension is offered,
// with the first server's settings and the members only later ones have.
func TestMergeExtensions(t *testing.T) {
	var m map[string]json.RawMessage
	m = mergeExtensions(m, json.RawMessage(`{"io.modelcontextprotocol/ui":{},"com.example/x":{"a":1,"deep":{"k":[1]}}}`))
	m = mergeExtensions(m, json.RawMessage(`not json`))
	m = mergeExtensions(m, json.RawMessage(`{"com.example/x":{"a":2,"b":true},"org.other/y":{"z":null},"com.example/off":null,"io.modelcontextprotocol/tasks":{}}`))
	got, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"io.modelcontextprotocol/ui":{},"com.example/x":{"a":1,"b":true,"deep":{"k":[1]}},"org.other/y":{"z":null},"io.modelcontextprotocol/tasks":{}}`, string(got))
	assert.Nil(t, mergeExtensions(nil, nil))
}
