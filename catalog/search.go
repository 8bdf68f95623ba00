package catalog

import (
	"bytes"
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/discovery"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// SearchView is what search mode shows, built with every commit from the
// committed catalog: the short tools/list and the index behind
// mcp_search_tools.
type SearchView struct {
	Index  *discovery.Index
	Listed json.RawMessage // the tools array of tools/list
	Result json.RawMessage // tools/list's result, around Listed
}

// NewSearchView builds the search mode view of cat; nil in mode all. The
// index holds exactly what tools/list would hold in mode all: every entry
// of the catalog but the discovery pair (the entries of own, the server of
// the aggregator's own tools, whose upstream name pair reports). Every
// entry of own is listed.
func NewSearchView(d config.Discovery, cat *Catalog, own string, pair func(original string) bool) *SearchView {
	return NextSearchView(d, cat, nil, own, pair)
}

// NextSearchView is NewSearchView after prev: the index reads again only
// the tools that changed since prev was built.
func NextSearchView(d config.Discovery, cat *Catalog, prev *SearchView, own string, pair func(original string) bool) *SearchView {
	if d.Mode != config.DiscoverySearch {
		return nil
	}
	entries := cat.Entries()
	tools := make([]discovery.Tool, 0, len(entries))
	var listed bytes.Buffer
	listed.WriteString(ToolsResultPrefix)
	listed.WriteByte('[')
	empty := listed.Len()
	for _, e := range entries {
		isPair := e.Server == own && pair(e.Original)
		if !isPair {
			tools = append(tools, discovery.Tool{Name: e.Exported, Original: e.Original, Server: e.Server, Raw: e.Raw})
		}
		if e.Server == own || AlwaysListed(d.Always, e.Exported) {
			if listed.Len() > empty {
				listed.WriteByte(',')
			}
			listed.Write(e.Raw)
		}
	}
	listed.WriteByte(']')
	var before *discovery.Index
	if prev != nil {
		before = prev.Index
	}
	v := &SearchView{Index: discovery.Rebuild(before, tools)}
	v.Result, v.Listed = ToolsResult(&listed)
	return v
}

// AlwaysListed reports whether name matches one of the discovery.always
// patterns, which search mode lists beside the pair.
func AlwaysListed(patterns []string, name string) bool {
	for _, p := range patterns {
		if naming.Match(p, name) {
			return true
		}
	}
	return false
}

// SameListing reports whether two views list the same tools; with the
// catalog's own comparison it decides whether clients hear list_changed.
func SameListing(a, b *SearchView) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Listed, b.Listed)
}
