package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// View is a narrower catalog served at /mcp/<name>: the fields of a
// Profile (a Match aside), applied within the caller's own profile.
type View = Profile

// viewNamePattern is what a view's name may be: it is a URL path segment.
var viewNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// readViews reads the top-level views mapping.
func readViews(r *reader, n *yaml.Node) (map[string]View, map[string]int) {
	if !r.mapping(n, "views", "NAME: {servers: [...], tools: [patterns]}") || isNull(n) {
		return nil, nil
	}
	own, merged := mappingPairs(n)
	out := map[string]View{}
	lines := map[string]int{}
	for _, p := range append(own, merged...) {
		field := "views." + p.key
		if _, dup := out[p.key]; dup {
			r.errorf(p.k.Line, field, "view set more than once; keep one")
			continue
		}
		if !viewNamePattern.MatchString(p.key) {
			r.errorf(p.k.Line, field, "a view is served at /mcp/<name>: use 1-64 letters, digits, '.', '_' or '-'")
			continue
		}
		if !r.mapping(p.v, field, "servers: [ids], tools: [patterns]") {
			continue
		}
		var v View
		if !isNull(p.v) {
			f := r.fields(p.v, field+".", "servers", "tools")
			if s, ok := f["servers"]; ok {
				v.Servers = r.strings(s.v, field+".servers")
			}
			if t, ok := f["tools"]; ok {
				for i, pat := range r.strings(t.v, field+".tools") {
					if pat == "" {
						r.errorf(t.v.Line, fmt.Sprintf("%s.tools[%d]", field, i), "empty pattern; write an exported tool name, * matches any run of characters (e.g. github_*)")
						continue
					}
					v.Tools = append(v.Tools, pat)
				}
			}
		}
		out[p.key] = v
		lines[p.key] = p.k.Line
	}
	return out, lines
}

// checkViews checks that every server a view names is defined.
func checkViews(ws *Workspace, file string, lines map[string]int) []Problem {
	known := map[string]bool{}
	for _, s := range ws.Servers {
		known[s.ID] = true
	}
	for _, id := range ws.Rejected {
		known[id] = true
	}
	names := make([]string, 0, len(ws.Views))
	for n := range ws.Views {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Problem
	for _, n := range names {
		for i, id := range ws.Views[n].Servers {
			if !known[id] {
				ids := make([]string, 0, len(known))
				for k := range known {
					ids = append(ids, k)
				}
				sort.Strings(ids)
				out = append(out, Problem{Severity: SeverityError, File: file, Line: lines[n], Field: fmt.Sprintf("views.%s.servers[%d]", n, i),
					Message: fmt.Sprintf("no server %q is defined; name a server of the config (%s)", id, strings.Join(ids, ", "))})
			}
		}
	}
	return out
}
