package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// ImportFile is one config file to import: its path and content.
type ImportFile struct {
	Name string
	Data []byte
}

// ImportOptions are the choices of an import beyond its files.
type ImportOptions struct {
	// Exclude names servers to leave out, by the id they are read as (the id
	// problems name them by), in whichever file they are defined. A name that
	// no server of the files is read as is an error.
	Exclude []string
}

// Imported is what an import wrote.
type Imported struct {
	YAML     []byte    // the native config; nil when nothing could be written
	Problems []Problem // what the translation noticed, at the files' own lines
	// Origins says where each server of YAML is defined, by id (for a server
	// several files define, the last, whose definition YAML holds).
	Origins map[string]Origin
}

// Origin is where an imported server is defined: a file as it was given, and
// the line of the server's name in it.
type Origin struct {
	File string
	Line int
	Name string // the name the file gives it, which may not be its id
}

// String is "FILE line N".
func (o Origin) String() string { return fmt.Sprintf("%s line %d", o.File, o.Line) }

// Import rewrites config files of any dialect as one native YAML document, so a user can
// switch to the native format for good: loading the result gives the same servers as
// loading the files. Later files replace servers of the same id, as layered --config
// files do. Comments say where each server came from and what the translation noticed.
// A file that cannot be read contributes nothing; its problems are returned.
func Import(files []ImportFile) ([]byte, []Problem) {
	r := ImportWith(files, ImportOptions{})
	return r.YAML, r.Problems
}

// ImportWith is Import with options: the servers it leaves out, and where each
// server it writes comes from.
func ImportWith(files []ImportFile, opts ImportOptions) Imported {
	out := mappingNode(1)
	addPair(out, "version", 1, scalarNode(fmt.Sprint(SupportedVersion), "!!int", 1))
	servers := mappingNode(1)
	index := map[string]int{} // server id -> its key's position in servers.Content
	origins := map[string]Origin{}
	exclude := map[string]bool{} // the ids to leave out -> whether a file defines one
	for _, id := range opts.Exclude {
		exclude[id] = false
	}
	var (
		problems []Problem
		header   = []string{"mcp-aggregator config, written by `mcp-aggregator import` from:"}
		sections = map[string]*yaml.Node{} // top-level settings, merged key by key
		order    []string
	)
	for _, f := range files {
		dir, err := filepath.Abs(filepath.Dir(f.Name))
		if err != nil {
			dir = filepath.Dir(f.Name)
		}
		r := &reader{problemList: problemList{file: f.Name}}
		root, isJSON, ok := decodeDocument(r, f.Data)
		var d Dialect
		unknown := false
		if ok {
			d, unknown = detectDialect(root, isJSON)
			if unknown {
				unknownShape(r, root)
			} else if d == DialectNative && !isMapping(root) {
				r.errorf(root.Line, "", "the top level must be a mapping with version: %d and servers:", SupportedVersion)
				unknown = true
			}
		}
		problems = append(problems, r.problems...)
		if !ok || unknown {
			header = append(header, fmt.Sprintf("  %s (not read: see the errors)", f.Name))
			continue
		}
		var t *translation
		if d == DialectNative {
			t = &translation{dialect: d, root: deref(root), notes: map[string]*serverNotes{}}
			t.servers = deref(topPairs(root)["servers"].v)
		} else {
			t = translate(d, fileContext{file: f.Name, dir: dir}, root)
		}
		if tooManyServers(r, t.servers) {
			problems = append(problems, r.problems[len(r.problems)-1])
			header = append(header, fmt.Sprintf("  %s (not read: see the errors)", f.Name))
			continue
		}
		header = append(header, fmt.Sprintf("  %s, read as %s", f.Name, d))
		problems = append(problems, t.problems.problems...)
		problems = append(problems, t.serverProblems(exclude)...)
		for _, skip := range t.skipped {
			header = append(header, "  left out: "+skip)
		}
		problems = append(problems, importServers(servers, index, t, f.Name, exclude, origins)...)
		own, merged := mappingPairs(t.root)
		for _, p := range append(own, merged...) {
			if p.key == "version" || p.key == "servers" {
				continue
			}
			prev, seen := sections[p.key]
			if !seen {
				order = append(order, p.key)
			}
			if seen && isMapping(prev) && isMapping(p.v) {
				sections[p.key] = mergeMappings(prev, p.v)
			} else {
				sections[p.key] = p.v
			}
		}
	}
	told := map[string]bool{}
	for _, id := range opts.Exclude {
		switch {
		case told[id]:
		case exclude[id] && serverIDPattern.MatchString(id):
			header = append(header, fmt.Sprintf("  left out: %s (--exclude)", id))
		case exclude[id]:
			header = append(header, fmt.Sprintf("  left out: %q (--exclude)", id))
		default:
			problems = append(problems, Problem{Severity: SeverityError, Field: "--exclude",
				Message: fmt.Sprintf("no server of the files is read as %q; name a server by the id it is read as, which problems and comments give", safeName(id))})
		}
		told[id] = true
	}
	for _, k := range order {
		addPair(out, k, 1, sections[k])
	}
	header = append(header,
		"Relative paths (cwd, env_file) are relative to this file's directory: save it beside",
		"the files above, or make them absolute. Check it with: mcp-aggregator check --config FILE")
	out.HeadComment = strings.Join(header, "\n")

	text, err := encodeConfig(out, servers)
	if err != nil {
		problems = append(problems, Problem{Severity: SeverityError, Message: "cannot write the YAML: " + err.Error()})
		return Imported{Problems: problems}
	}
	return Imported{YAML: text, Problems: problems, Origins: origins}
}

// serverProblems are what the translation noticed of each server, in the order of the
// servers, but for the servers exclude names.
func (t *translation) serverProblems(exclude map[string]bool) []Problem {
	var problems []Problem
	if t.servers == nil {
		return nil
	}
	own, merged := mappingPairs(t.servers)
	told := map[string]bool{}
	for _, p := range append(own, merged...) {
		_, out := exclude[p.key]
		if n := t.notes[p.key]; n != nil && !out && !told[p.key] {
			told[p.key] = true
			problems = append(problems, n.problems...)
		}
	}
	return problems
}

// encodeConfig writes the document settings (version and the workspace settings) and
// then servers under servers:, one server at a time. The YAML encoder keeps every event
// of a document until the document ends, so a config of tens of thousands of servers
// written as one document would be held in memory several times over; written one
// server at a time and indented in place, it reads the same.
func encodeConfig(settings, servers *yaml.Node) ([]byte, error) {
	var buf, one bytes.Buffer
	if err := encodeYAML(&buf, tidy(settings)); err != nil {
		return nil, err
	}
	if len(servers.Content) == 0 {
		buf.WriteString("servers: {}\n")
		return buf.Bytes(), nil
	}
	buf.WriteString("servers:\n")
	for i := 0; i+1 < len(servers.Content); i += 2 {
		server := mappingNode(1)
		addPairNode(server, servers.Content[i], servers.Content[i+1])
		one.Reset()
		// At depth 1, where the servers mapping is in the document.
		if err := encodeYAML(&one, tidyAt(server, 1)); err != nil {
			return nil, err
		}
		indent(&buf, one.Bytes())
	}
	return buf.Bytes(), nil
}

// indent writes text with two spaces before every line that is not empty, as the
// encoder indents a nested node. Lines end where YAML says they do: at \n, \r, \r\n,
// and at the next-line, line and paragraph separators, which a comment may hold.
func indent(w *bytes.Buffer, text []byte) {
	atStart := true
	for i := 0; i < len(text); {
		if n := lineBreak(text[i:]); n > 0 {
			w.Write(text[i : i+n])
			i += n
			atStart = true
			continue
		}
		if atStart {
			w.WriteString("  ")
			atStart = false
		}
		w.WriteByte(text[i])
		i++
	}
}

// lineBreak is the length of the line break text starts with, or 0.
func lineBreak(text []byte) int {
	switch {
	case bytes.HasPrefix(text, []byte("\r\n")):
		return 2
	case len(text) > 0 && (text[0] == '\n' || text[0] == '\r'):
		return 1
	case bytes.HasPrefix(text, []byte("\u0085")):
		return 2
	case bytes.HasPrefix(text, []byte("\u2028")), bytes.HasPrefix(text, []byte("\u2029")):
		return 3
	}
	return 0
}

// encodeYAML writes n as one YAML document, indented by two spaces.
func encodeYAML(w *bytes.Buffer, n *yaml.Node) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	return enc.Close()
}

// importServers adds t's servers to servers, a later definition replacing an earlier one
// in place, each with a comment on where it came from. index holds the position of each
// id's key in servers.Content, so that finding an earlier definition costs the same for
// the last server of a large file as for the first. Servers exclude names are left out
// (and marked found); a server the file defines twice, which loading it refuses, is an
// error, not the silent replacement of the first.
func importServers(servers *yaml.Node, index map[string]int, t *translation, file string, exclude map[string]bool, origins map[string]Origin) []Problem {
	if t.servers == nil || !isMapping(t.servers) {
		return nil
	}
	var problems []Problem
	first := map[string]int{} // id -> the line of its first definition in this file
	own, merged := mappingPairs(t.servers)
	for _, p := range own {
		if _, out := exclude[p.key]; out {
			continue
		}
		if line, twice := first[p.key]; twice {
			problems = append(problems, Problem{Severity: SeverityError, File: file, Line: p.k.Line, Server: p.key,
				Message: fmt.Sprintf("defined again (first on line %d), which loading this file refuses; rename or remove one of them", line)})
			continue
		}
		first[p.key] = p.k.Line
	}
	for _, p := range append(own, merged...) {
		if _, out := exclude[p.key]; out {
			exclude[p.key] = true
			continue
		}
		name := p.key
		if n := t.notes[p.key]; n != nil {
			name = n.name
		}
		if prev, ok := origins[p.key]; ok && prev.File != file && prev.Name != name {
			// Layered files replace a server by id, meant for a server both name
			// alike; these two names differ, one of them renamed to the id, so the
			// two are likely different servers.
			problems = append(problems, Problem{Severity: SeverityWarning, File: file, Line: p.k.Line, Server: p.key,
				Message: fmt.Sprintf("%q replaces %q of %s, both read as %q; rename one of them in its file to keep both",
					safeName(name), safeName(prev.Name), prev, p.key)})
		}
		origins[p.key] = Origin{File: file, Line: p.k.Line, Name: name}
		key := scalarNode(p.key, "!!str", p.k.Line)
		var comment []string
		if n := t.notes[p.key]; n != nil {
			comment = append(comment, fmt.Sprintf("from %s line %d: %s", filepath.Base(file), p.k.Line, n.source))
			for _, pr := range n.problems {
				msg := pr.Message
				if pr.Field != "" {
					msg = pr.Field + ": " + msg
				}
				comment = append(comment, "note: "+strings.ReplaceAll(msg, "\n", " "))
			}
		} else {
			comment = append(comment, fmt.Sprintf("from %s line %d", filepath.Base(file), p.k.Line))
		}
		if literalValues(p.v) {
			comment = append(comment, "env and header values written in the source are copied as they are;",
				"keep secrets out of this file with NAME: {env: HOST_VAR} or an env_file")
		}
		key.HeadComment = strings.Join(comment, "\n")
		if i, ok := index[p.key]; ok {
			servers.Content[i], servers.Content[i+1] = key, p.v
			continue
		}
		index[p.key] = len(servers.Content)
		addPairNode(servers, key, p.v)
	}
	return problems
}

// literalValues reports whether a server sets env or header values as plain text, which
// may be secrets copied from a client's config.
func literalValues(server *yaml.Node) bool {
	f := topPairs(server)
	for _, k := range []string{"env", "headers"} {
		m, ok := f[k]
		if !ok || !isMapping(m.v) {
			continue
		}
		for _, p := range topPairs(m.v) {
			if v := deref(p.v); v.Kind == yaml.ScalarNode && v.Value != "" && !strings.Contains(v.Value, "${") {
				return true
			}
		}
	}
	return false
}

// mergeMappings overlays b's entries on a's, key by key.
func mergeMappings(a, b *yaml.Node) *yaml.Node {
	out := mappingNode(a.Line)
	index := map[string]int{}
	for _, src := range []*yaml.Node{a, b} {
		own, merged := mappingPairs(src)
		for _, p := range append(own, merged...) {
			if i, ok := index[p.key]; ok {
				out.Content[i+1] = p.v
				continue
			}
			index[p.key] = len(out.Content)
			addPairNode(out, p.k, p.v)
		}
	}
	return out
}

// unicodeBreaks are the characters besides \n and \r that YAML 1.1 reads as line breaks:
// next line, line separator and paragraph separator.
const unicodeBreaks = "\u0085\u2028\u2029"

// tidy copies a node tree for printing in the native style: block mappings, short lists
// and {env: NAME} on one line, strings quoted only where YAML needs it, aliases expanded.
func tidy(n *yaml.Node) *yaml.Node {
	return tidyAt(n, 0)
}

func tidyAt(n *yaml.Node, depth int) *yaml.Node {
	n = deref(n)
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
	out := &yaml.Node{Kind: n.Kind, Tag: n.Tag, Value: n.Value, HeadComment: n.HeadComment, LineComment: n.LineComment}
	if depth > maxAliasDepth*4 {
		return out
	}
	switch n.Kind {
	case yaml.ScalarNode:
		switch {
		case strings.ContainsAny(n.Value, unicodeBreaks):
			// The encoder would write these as they are, as line breaks of a
			// literal block, and one at the end leaves the file without its
			// last newline; escaped in double quotes they read back the same.
			out.Style = yaml.DoubleQuotedStyle
		case n.Tag == "!!str" && (n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle):
			out.Style = 0 // the encoder quotes where the plain form would read otherwise
		default:
			out.Style = n.Style
		}
	case yaml.SequenceNode:
		short := true
		for _, item := range n.Content {
			c := tidyAt(item, depth+1)
			out.Content = append(out.Content, c)
			short = short && c.Kind == yaml.ScalarNode && len(c.Value) < 60
		}
		if short && len(n.Content) > 0 {
			out.Style = yaml.FlowStyle
		}
	case yaml.MappingNode:
		own, merged := mappingPairs(n)
		for _, p := range append(own, merged...) {
			k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p.key, HeadComment: p.k.HeadComment, LineComment: p.k.LineComment}
			if strings.ContainsAny(p.key, unicodeBreaks) {
				k.Style = yaml.DoubleQuotedStyle
			}
			out.Content = append(out.Content, k, tidyAt(p.v, depth+1))
		}
		if len(out.Content) == 2 && out.Content[0].Value == "env" && out.Content[1].Kind == yaml.ScalarNode {
			out.Style = yaml.FlowStyle // {env: NAME}
		}
	}
	return out
}
