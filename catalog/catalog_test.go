package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

func TestRenamed(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		to   string
		want string
	}{
		{"plain", `{"name":"echo","description":"Echo."}`, "demo_echo", `{"name":"demo_echo","description":"Echo."}`},
		{"name last, key order kept", `{"description":"d","inputSchema":{"type":"object"},"name":"echo"}`, "x",
			`{"description":"d","inputSchema":{"type":"object"},"name":"x"}`},
		{"whitespace around the member kept", "{\n  \"title\" : \"T\",\n  \"name\" :\t \"echo\" ,\n  \"x\": 1\n}", "demo_echo",
			"{\n  \"title\" : \"T\",\n  \"name\" :\t \"demo_echo\" ,\n  \"x\": 1\n}"},
		{"nested name keys untouched",
			`{"inputSchema":{"type":"object","name":"inner","properties":{"name":{"type":"string","default":"name"}}},"name":"outer","annotations":{"name":"a"}}`,
			"p_outer",
			`{"inputSchema":{"type":"object","name":"inner","properties":{"name":{"type":"string","default":"name"}}},"name":"p_outer","annotations":{"name":"a"}}`},
		{"name inside a string untouched", `{"description":"\"name\":\"echo\"","name":"echo"}`, "e2",
			`{"description":"\"name\":\"echo\"","name":"e2"}`},
		{"unicode and escapes kept", `{"name":"écho","description":"\u00e9\u4e2d 🚀 <b>&</b>","big":12345678901234567890}`, "echo_x",
			`{"name":"echo_x","description":"\u00e9\u4e2d 🚀 <b>&</b>","big":12345678901234567890}`},
		{"escaped old name", `{"name":"a\u0062c","x":[1,2]}`, "abc2", `{"name":"abc2","x":[1,2]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Renamed(json.RawMessage(tc.raw), tc.to)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got), "only the top-level name changes, byte for byte")
		})
	}

	t.Run("the input is not modified", func(t *testing.T) {
		raw := json.RawMessage(`{"name":"a","b":1}`)
		_, err := Renamed(raw, "longer_name")
		require.NoError(t, err)
		assert.Equal(t, `{"name":"a","b":1}`, string(raw))
	})

	for _, bad := range []string{`[{"name":"a"}]`, `"name"`, `42`, `{"description":"no name"}`, `{"name":`, ``, `{"a":{"name":"x"}}`} {
		t.Run("error for "+bad, func(t *testing.T) {
			_, err := Renamed(json.RawMessage(bad), "x")
			assert.Error(t, err)
		})
	}
}

// catalogOf builds a catalog holding the given servers' entries, in order.
func catalogOf(servers ...[]*Entry) *Catalog {
	c := Empty()
	for _, entries := range servers {
		c = c.WithServer(entries[0].Server, entries)
	}
	c.Render()
	return c
}

func entry(server, name, raw string) *Entry {
	return &Entry{Exported: name, Server: server, Original: name, Raw: json.RawMessage(raw)}
}

func TestSameSurface(t *testing.T) {
	a1 := entry("a", "a_one", `{"name":"a_one","description":"first"}`)
	a2 := entry("a", "a_two", `{"name":"a_two"}`)
	b1 := entry("b", "b_one", `{"name":"b_one","inputSchema":{"type":"object"}}`)
	base := catalogOf([]*Entry{a1, a2}, []*Entry{b1})

	tests := []struct {
		name  string
		other *Catalog
		same  bool
	}{
		{"identical", catalogOf([]*Entry{a1, a2}, []*Entry{b1}), true},
		{"servers in another order", catalogOf([]*Entry{b1}, []*Entry{a1, a2}), true},
		{"tools in another order", catalogOf([]*Entry{a2, a1}, []*Entry{b1}), true},
		{"equal bytes, new entry values", catalogOf([]*Entry{entry("a", "a_one", `{"name":"a_one","description":"first"}`), a2}, []*Entry{b1}), true},
		{"a tool moved to another server, same bytes", catalogOf([]*Entry{a1}, []*Entry{b1, entry("b", "a_two", `{"name":"a_two"}`)}), true},
		{"a description changed", catalogOf([]*Entry{entry("a", "a_one", `{"name":"a_one","description":"changed"}`), a2}, []*Entry{b1}), false},
		{"only whitespace changed", catalogOf([]*Entry{entry("a", "a_one", `{"name":"a_one", "description":"first"}`), a2}, []*Entry{b1}), false},
		{"a tool renamed", catalogOf([]*Entry{a1, entry("a", "a_2", `{"name":"a_2"}`)}, []*Entry{b1}), false},
		{"a tool removed", catalogOf([]*Entry{a1, a2}), false},
		{"a tool added", catalogOf([]*Entry{a1, a2}, []*Entry{b1, entry("b", "b_two", `{"name":"b_two"}`)}), false},
		{"empty", Empty(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, SameSurface(base, tc.other))
			assert.Equal(t, tc.same, SameSurface(tc.other, base), "symmetric")
		})
	}
	assert.True(t, SameSurface(Empty(), Empty()))
}

func TestCatalogSnapshot(t *testing.T) {
	a1 := entry("a", "a_one", `{"name":"a_one"}`)
	b1 := entry("b", "b_one", `{"name":"b_one"}`)
	c := catalogOf([]*Entry{a1}, []*Entry{b1})
	assert.JSONEq(t, `[{"name":"a_one"},{"name":"b_one"}]`, string(c.ToolsJSON()))
	assert.Equal(t, 2, c.Len())
	owner, ok := c.Owner("b_one")
	assert.True(t, ok)
	assert.Equal(t, "b", owner)
	_, ok = c.Lookup("nope")
	assert.False(t, ok)

	// withServer copies: the original snapshot never changes.
	d := c.WithServer("a", nil)
	d.Render()
	assert.Equal(t, 2, c.Len())
	assert.Equal(t, `[{"name":"b_one"}]`, string(d.ToolsJSON()))

	d = c.WithServer("a", []*Entry{a1})
	d.WithOrder([]string{"b", "a"})
	d.Render()
	assert.Equal(t, `[{"name":"b_one"},{"name":"a_one"}]`, string(d.ToolsJSON()))
	assert.Equal(t, `[]`, string(Empty().ToolsJSON()))
}

// TestToolsResultIsShared: tools/list's result is rendered once around the
// tools array, and neither leaves room for an append to write into what
// every request shares.
func TestToolsResultIsShared(t *testing.T) {
	c := Empty().WithServer("a", []*Entry{entry("a", "x", `{"name":"x"}`), entry("a", "y", `{"name":"y"}`)})
	c.Render()
	assert.Equal(t, `{"tools":[{"name":"x"},{"name":"y"}]}`, string(c.ToolsResult()))
	assert.Equal(t, `[{"name":"x"},{"name":"y"}]`, string(c.ToolsJSON()))
	assert.Equal(t, len(c.ToolsResult()), cap(c.ToolsResult()))
	assert.Equal(t, len(c.ToolsJSON()), cap(c.ToolsJSON()))
	grown := rawjson.Add(c.ToolsResult(), "ttlMs", []byte("0"))
	assert.Equal(t, `{"ttlMs":0,"tools":[{"name":"x"},{"name":"y"}]}`, string(grown))
	assert.Equal(t, `{"tools":[{"name":"x"},{"name":"y"}]}`, string(c.ToolsResult()), "unchanged")
	assert.Equal(t, `{"tools":[]}`, string(Empty().ToolsResult()))
}

func TestEntryObserved(t *testing.T) {
	e := &Entry{Server: "s", Exported: "t"}
	a, b := new(int), new(int)
	assert.Nil(t, e.Observed(a))
	e.Observe(a, "a's")
	assert.Equal(t, "a's", e.Observed(a))
	assert.Nil(t, e.Observed(b), "another owner sees nothing of a's")
	e.Observe(b, nil)
	assert.Equal(t, "a's", e.Observed(a), "removing b's leaves a's")
	e.Observe(b, "b's")
	assert.Nil(t, e.Observed(a), "b's replaced a's")
	e.Observe(b, nil)
	assert.Nil(t, e.Observed(b))
}
