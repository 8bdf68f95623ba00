package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/discovery"
)

// TestSearchView: search mode lists the own server's tools and the
// discovery.always matches, and indexes every tool but the pair.
func TestSearchView(t *testing.T) {
	pair := func(original string) bool { return original == "find" }
	c := catalogOf(
		[]*Entry{entry("own", "find", `{"name":"find"}`), entry("own", "status", `{"name":"status"}`)},
		[]*Entry{entry("a", "a_echo", `{"name":"a_echo","description":"Echo the text back."}`), entry("a", "fs_read", `{"name":"fs_read","description":"Read a file."}`)},
		[]*Entry{{Exported: "b_find", Server: "b", Original: "find", Raw: json.RawMessage(`{"name":"b_find","description":"Find a needle."}`)}},
	)
	search := config.Discovery{Mode: config.DiscoverySearch, Always: []string{"fs_*"}}

	assert.Nil(t, NewSearchView(config.Discovery{Mode: config.DiscoveryAll}, c, "own", pair), "no view in mode all")

	v := NewSearchView(search, c, "own", pair)
	require.NotNil(t, v)
	assert.JSONEq(t, `[{"name":"find"},{"name":"status"},{"name":"fs_read","description":"Read a file."}]`, string(v.Listed))
	assert.JSONEq(t, `{"tools":`+string(v.Listed)+`}`, string(v.Result))
	assert.Equal(t, len(v.Result), cap(v.Result), "no room to append into what requests share")
	assert.Equal(t, 4, v.Index.Len(), "every tool but the own server's pair; another server's tool of the same upstream name stays")
	hits := v.Index.Search(discovery.Query{Text: "needle", Limit: 1})
	require.Len(t, hits, 1)
	assert.Equal(t, "b", hits[0].Tool.Server)

	next := NextSearchView(search, c, v, "own", pair)
	assert.True(t, SameListing(v, next))
	fewer := NextSearchView(search, c.WithServer("a", nil), v, "own", pair)
	assert.False(t, SameListing(v, fewer))
	assert.True(t, SameListing(nil, nil))
	assert.False(t, SameListing(v, nil))
}

func TestAlwaysListed(t *testing.T) {
	assert.True(t, AlwaysListed([]string{"x", "fs_*"}, "fs_read"))
	assert.False(t, AlwaysListed([]string{"fs_*"}, "gh_issue"))
	assert.False(t, AlwaysListed(nil, "fs_read"))
}
