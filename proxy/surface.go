package proxy

import "github.com/mcp-aggregator/mcp-aggregator/catalog"

// buildSurface builds the catalog's surface (resources, templates,
// prompts) of the running servers, taken in order, without the exported
// app resources hidden names.
func buildSurface(order []string, servers map[string]*runningServer, pattern string, hidden map[string]bool) *catalog.Surface {
	lists := make([]catalog.ServerLists, 0, len(order))
	for _, id := range order {
		if rs := servers[id]; rs != nil {
			lists = append(lists, rs.lists())
		}
	}
	return catalog.NewSurface(lists, pattern, hidden)
}

// lists is what rs declared and listed beyond tools, as the surface takes it.
func (rs *runningServer) lists() catalog.ServerLists {
	l := catalog.ServerLists{
		Config: rs.cfg,
		Declared: catalog.Declared{Resources: rs.caps.Resources, Subscribe: rs.caps.ResourcesSubscribe, Prompts: rs.caps.Prompts,
			Completions: rs.caps.Completions, Logging: rs.caps.Logging, Extensions: rs.caps.Extensions},
		Resources: make([]catalog.Listed, len(rs.resources)),
		Templates: make([]catalog.Listed, len(rs.templates)),
		Prompts:   make([]catalog.Listed, len(rs.prompts)),
	}
	for i, r := range rs.resources {
		l.Resources[i] = catalog.Listed{Key: r.URI, Raw: r.Raw}
	}
	for i, t := range rs.templates {
		l.Templates[i] = catalog.Listed{Key: t.URITemplate, Raw: t.Raw}
	}
	for i, p := range rs.prompts {
		l.Prompts[i] = catalog.Listed{Key: p.Name, Raw: p.Raw}
	}
	return l
}
