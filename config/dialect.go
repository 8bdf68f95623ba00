package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Dialect is the shape a config file was read as: the native format, or one of the
// formats other MCP clients and agent frameworks keep their servers in. A dialect file
// is translated into a native document, with every value keeping its line, and then
// read, validated and reported on exactly like a native one.
type Dialect string

// Dialects, detected by content.
const (
	DialectNative     Dialect = "native"
	DialectMCPServers Dialect = "mcpServers"
	DialectVSCode     Dialect = "vscode"
	DialectTENEX      Dialect = "tenex"
	DialectHoloDeck   Dialect = "holodeck"
	DialectChatagent  Dialect = "chatagent"
)

// String names the dialect for people.
func (d Dialect) String() string {
	switch d {
	case DialectNative:
		return "mcp-aggregator YAML"
	case DialectMCPServers:
		return "mcpServers JSON (Claude Desktop, Cursor, Claude Code .mcp.json, Gemini CLI)"
	case DialectVSCode:
		return "VS Code mcp.json (servers)"
	case DialectTENEX:
		return "TENEX mcp.json (servers)"
	case DialectHoloDeck:
		return "HoloDeck agent.yaml (tools of type mcp)"
	case DialectChatagent:
		return "chatagent config (mcps)"
	}
	return string(d)
}

// shapesHelp lists the shapes a file may have, for the unknown-shape error.
const shapesHelp = "write version: 1 and servers: (mcp-aggregator YAML), or use a config another client reads: " +
	"mcpServers (Claude Desktop, Cursor, Claude Code, Gemini CLI), servers (VS Code, TENEX), " +
	"tools: entries of type: mcp (HoloDeck agent.yaml) or mcps: (chatagent)"

// nativeTopKeys are the native top-level keys that make a file native even without version.
var nativeTopKeys = []string{"servers", "limits", "security", "naming", "admin", "http"}

// detectDialect tells which shape root has. isJSON says the file was JSON: a JSON file
// with servers and no version is VS Code's or TENEX's, while a YAML one is a native config
// that lacks its version. unknown is true when the file has none of the shapes.
func detectDialect(root *yaml.Node, isJSON bool) (d Dialect, unknown bool) {
	if !isMapping(root) {
		return DialectNative, false // the native reader explains what the top level must be
	}
	top := topPairs(root)
	_, hasVersion := top["version"]
	_, hasServers := top["servers"]
	if _, ok := top["mcpServers"]; ok && !hasServers {
		return DialectMCPServers, false
	}
	switch {
	case hasVersion:
		return DialectNative, false
	case hasServers && isJSON && len(ownKeys(root, 1)) > 0:
		return DialectNative, false // which then asks for its version
	case hasServers && isJSON:
		return serversDialect(root), false
	case hasServers:
		return DialectNative, false
	}
	if p, ok := top["mcp"]; ok && isMapping(p.v) {
		if _, ok := topPairs(p.v)["servers"]; ok {
			return DialectVSCode, false // VS Code's settings.json: "mcp": {"servers": ...}
		}
	}
	if p, ok := top["tools"]; ok && isHoloDeckTools(p.v) {
		return DialectHoloDeck, false
	}
	if chatagentMCPs(root) != nil {
		return DialectChatagent, false
	}
	for _, k := range nativeTopKeys {
		if _, ok := top[k]; ok {
			return DialectNative, false
		}
	}
	return "", true
}

// ownKeys returns up to limit keys of root, a JSON file with servers and no version, that
// belong to the native format and to no client's servers JSON: top-level settings such
// as limits, and server keys such as transform, tools or truely-stateless. A file using
// one was written for mcp-aggregator; read as a VS Code or TENEX mcp.json it would lose
// them, filters included, to warnings. Keys are named by their path.
func ownKeys(root *yaml.Node, limit int) []string {
	var found []string
	top := topPairs(root)
	for _, k := range topKeys {
		if _, ok := top[k]; ok && k != "version" && k != "servers" && len(found) < limit {
			found = append(found, k)
		}
	}
	servers := top["servers"].v
	if !isMapping(servers) {
		return found
	}
	own, merged := mappingPairs(servers)
	for _, s := range append(own, merged...) {
		if len(found) >= limit {
			break
		}
		if !isMapping(s.v) {
			continue
		}
		keys, more := mappingPairs(s.v)
		for _, k := range append(keys, more...) {
			if len(found) < limit && isOwnServerKey(k.key) {
				found = append(found, "servers."+s.key+"."+k.key)
			}
		}
	}
	return found
}

// isOwnServerKey reports whether key is a native server key that no client's server
// entry has.
func isOwnServerKey(key string) bool {
	return slices.Contains(serverKeys, key) && !slices.Contains(clientKeys, key) && !clientOnlyKeys[key] && key != "allowedPaths"
}

// serversDialect tells VS Code's servers JSON from TENEX's: VS Code has inputs and typed
// servers. Both are read alike; the name only serves messages.
func serversDialect(root *yaml.Node) Dialect {
	top := topPairs(root)
	if _, ok := top["inputs"]; ok {
		return DialectVSCode
	}
	if p, ok := top["servers"]; ok && isMapping(p.v) {
		own, _ := mappingPairs(p.v)
		for _, s := range own {
			if isMapping(s.v) {
				if _, typed := topPairs(s.v)["type"]; typed {
					return DialectVSCode
				}
			}
		}
	}
	return DialectTENEX
}

// isHoloDeckTools reports whether n is a list of tool entries with a type, as in a
// HoloDeck agent.yaml.
func isHoloDeckTools(n *yaml.Node) bool {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return false
	}
	for _, item := range n.Content {
		if isMapping(item) {
			if _, ok := topPairs(item)["type"]; ok {
				return true
			}
		}
	}
	return false
}

// unknownShape is the error for a file that has none of the shapes.
func unknownShape(r *reader, root *yaml.Node) {
	keys := make([]string, 0)
	for k := range topPairs(root) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	found := "it has no top-level keys"
	if len(keys) > 0 {
		found = "its top-level keys are " + strings.Join(keys, ", ")
	}
	r.errorf(root.Line, "", "not a config mcp-aggregator can read (%s); %s", found, shapesHelp)
}

// topPairs indexes a mapping's own entries by key (first one wins).
func topPairs(n *yaml.Node) map[string]pair {
	own, merged := mappingPairs(n)
	out := make(map[string]pair, len(own)+len(merged))
	for _, p := range append(own, merged...) {
		if _, dup := out[p.key]; !dup {
			out[p.key] = p
		}
	}
	return out
}

// translation is a dialect file rewritten as a native document.
type translation struct {
	dialect  Dialect
	root     *yaml.Node // the native document: version, servers and settings
	servers  *yaml.Node // root's servers mapping
	limits   *yaml.Node // root's limits mapping, once one is needed
	problems problemList
	notes    map[string]*serverNotes // by server id
	skipped  []string                // comments for import: what was left out and why
	ids      map[string]string       // source name -> the id uniqueID gave it
	suffix   map[string]int          // derived id -> the next -N suffix worth trying
	valid    map[string]bool         // the valid ids the file's servers are named, kept for them
}

// keep reserves for each name that is a valid server id that id, so that a name
// read as a valid one ("Brave Search" as Brave-Search) never takes the id of a
// server of the file named so, before or after it.
func (t *translation) keep(names ...string) {
	for _, name := range names {
		if serverIDPattern.MatchString(name) {
			if t.valid == nil {
				t.valid = map[string]bool{}
			}
			t.valid[name] = true
		}
	}
}

// serverNotes is what the translation of one server found.
type serverNotes struct {
	problemList
	key    *yaml.Node        // its key in the native servers mapping
	out    *yaml.Node        // its native definition
	fields map[string]string // native field name -> the source's name for it
	source string            // where it came from, e.g. mcpServers.github
	name   string            // the name the source gives it
}

func newTranslation(d Dialect, file string, line int) *translation {
	t := &translation{dialect: d, problems: problemList{file: file}, notes: map[string]*serverNotes{}}
	t.root = mappingNode(line)
	addPair(t.root, "version", line, scalarNode(fmt.Sprint(SupportedVersion), "!!int", line))
	t.servers = mappingNode(line)
	addPair(t.root, "servers", line, t.servers)
	return t
}

// server starts the native definition of a server read from key. The id is key's text
// if that is a valid server id, else a valid id derived from it (with a warning).
func (t *translation) server(name string, key *yaml.Node, source string) *serverNotes {
	id := t.uniqueID(name)
	s := &serverNotes{problemList: problemList{file: t.problems.file, server: id}, fields: map[string]string{}, source: source, name: name}
	switch {
	case id == name:
	case name == ReservedServerID:
		s.warnf(key.Line, "", "%q is reserved for the aggregator's own admin tools; it is read as %q (rename it in the source to choose another id)", name, id)
	case serverIDPattern.MatchString(name):
		// Valid, but another server of the file was read as this id first.
		s.warnf(key.Line, "", "%q is read as %q: another server of this file is already read as %q (rename one in the source to choose the ids)", name, id, name)
	default:
		s.warnf(key.Line, "", "%q is not a valid server id here (1 to 64 letters, digits, '.', '_' or '-'); it is read as %q", safeName(name), id)
	}
	s.key = scalarNode(id, "!!str", key.Line)
	s.out = mappingNode(key.Line)
	addPairNode(t.servers, s.key, s.out)
	t.notes[id] = s
	return s
}

// uniqueID turns a client's server name into a valid id not used yet in this file and
// not the reserved one.
func (t *translation) uniqueID(name string) string {
	id := name
	if !serverIDPattern.MatchString(id) {
		var b strings.Builder
		dash := false
		for _, r := range name {
			ok := r < 128 && (r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
			switch {
			case ok:
				b.WriteRune(r)
				dash = false
			case !dash && b.Len() > 0:
				b.WriteByte('-')
				dash = true
			}
		}
		id = strings.TrimRight(b.String(), "-")
		if len(id) > 64 {
			id = id[:64]
		}
		if id == "" {
			id = "server"
		}
	}
	if prev, ok := t.ids[name]; ok {
		return prev // a name written twice is the native reader's duplicate to report
	}
	if t.ids == nil {
		t.ids, t.suffix = map[string]string{}, map[string]int{}
	}
	unique := id
	if _, taken := t.notes[id]; taken || id == ReservedServerID || id != name && t.valid[id] {
		// The suffixes below suffix[id] are all taken (ids are never given back),
		// so many names that read as one id cost one step each, not one per
		// name before them.
		n := max(t.suffix[id], 2)
		for ; ; n++ {
			unique = fmt.Sprintf("%s-%d", id, n)
			if _, taken := t.notes[unique]; !taken && !t.valid[unique] {
				break
			}
		}
		t.suffix[id] = n + 1
	}
	t.ids[name] = unique
	return unique
}

// set adds a native key to the server, read from the source key srcKey.
func (s *serverNotes) set(native string, srcKey *yaml.Node, v *yaml.Node) {
	src := native
	if srcKey != nil {
		src = srcKey.Value
		if src != native {
			s.fields[native] = src
		}
	}
	line := v.Line
	if srcKey != nil {
		line = srcKey.Line
	}
	addPair(s.out, native, line, v)
}

// sub returns the server's native mapping under key, creating it.
func (s *serverNotes) sub(key string, line int) *yaml.Node {
	for i := 0; i+1 < len(s.out.Content); i += 2 {
		if s.out.Content[i].Value == key {
			return s.out.Content[i+1]
		}
	}
	m := mappingNode(line)
	addPair(s.out, key, line, m)
	return m
}

// ignoredKeys warns once about keys of the source that mean nothing here; one and
// many describe them in the singular and the plural.
func (s *serverNotes) ignoredKeys(keys []pair, one, many string) {
	switch len(keys) {
	case 0:
	case 1:
		s.warnf(keys[0].k.Line, keys[0].key, "%s; ignored", one)
	default:
		names := make([]string, len(keys))
		for i, p := range keys {
			names[i] = p.key
		}
		s.warnf(keys[0].k.Line, "", "%s: %s; ignored", strings.Join(names, ", "), many)
	}
}

// rename rewrites the field of a native problem about this server in the source's terms.
func (s *serverNotes) rename(field string) string {
	for native, src := range s.fields {
		if field == native {
			return src
		}
		for _, sep := range []string{".", "["} {
			if rest, ok := strings.CutPrefix(field, native+sep); ok {
				return src + sep + rest
			}
		}
	}
	return field
}

// limitsNode returns the native limits mapping, creating it.
func (t *translation) limitsNode(line int) *yaml.Node {
	if t.limits == nil {
		t.limits = mappingNode(line)
		addPair(t.root, "limits", line, t.limits)
	}
	return t.limits
}

func mappingNode(line int) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
}

func sequenceNode(line int, items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: line, Content: items}
}

func scalarNode(value, tag string, line int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value, Line: line}
}

func addPair(m *yaml.Node, key string, line int, v *yaml.Node) {
	addPairNode(m, scalarNode(key, "!!str", line), v)
}

func addPairNode(m, k, v *yaml.Node) { m.Content = append(m.Content, k, v) }

// scalarText is a scalar's text, or "" for anything else.
func scalarText(n *yaml.Node) string {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || isNull(n) {
		return ""
	}
	return n.Value
}
