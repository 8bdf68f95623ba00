package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// reader reads typed values out of YAML nodes, recording a Problem for every value it
// cannot use. With a lookup it also expands ${VAR} references (server scope); without one
// strings are taken literally (workspace scope).
type reader struct {
	problemList
	lookup  func(string) (string, bool)
	envFile string // the server's env_file, quoted for messages (or a placeholder if secret)
	// taken collects every text substituted from the environment or an env file, in
	// whatever field: such texts are secrets wherever they end up (a URL path, an
	// argument, a working directory) and are scrubbed from all output.
	taken []string
}

// noteTaken records texts that came from the environment; empty ones are skipped.
func (r *reader) noteTaken(values ...string) {
	for _, v := range values {
		if v != "" {
			r.taken = append(r.taken, v)
		}
	}
}

// text is a string read from the config, with a note of whether it came from the
// environment: such values are secrets and never appear in a Problem.
type text struct {
	s       string
	fromEnv bool
	spans   []span // where in s the texts from the environment lie
}

// quoted shows the value in a message, unless it may be a secret.
func (t text) quoted() string {
	if t.fromEnv {
		return "<value from the environment>"
	}
	return strconv.Quote(t.s)
}

// fields indexes a mapping's entries by key. Unknown keys get a warning with a suggestion;
// keys written twice are errors. path prefixes field names in problems ("" or "tools.").
func (r *reader) fields(n *yaml.Node, path string, known ...string) map[string]pair {
	own, merged := mappingPairs(n)
	out := make(map[string]pair, len(own)+len(merged))
	isKnown := make(map[string]bool, len(known))
	for _, k := range known {
		isKnown[k] = true
	}
	for _, p := range own {
		if _, dup := out[p.key]; dup {
			r.errorf(p.k.Line, path+p.key, "key appears more than once in this mapping; keep one")
			continue
		}
		out[p.key] = p
	}
	for _, p := range append(own, merged...) {
		if isKnown[p.key] {
			continue
		}
		delete(out, p.key)
		hint := ""
		if c := closest(p.key, known); c != "" {
			hint = fmt.Sprintf("did you mean %q? ", c)
		}
		r.warnf(p.k.Line, path+p.key, "unknown key, ignored; %sknown keys: %s", hint, strings.Join(known, ", "))
	}
	for _, p := range merged {
		if _, ok := out[p.key]; !ok && isKnown[p.key] {
			out[p.key] = p
		}
	}
	return out
}

// mapping checks that a node is a mapping (null counts as empty) and reports otherwise.
func (r *reader) mapping(n *yaml.Node, field, want string) bool {
	if isNull(n) || isMapping(n) {
		return true
	}
	r.errorf(n.Line, field, "must be a mapping (%s)", want)
	return false
}

// text reads a scalar string. ok is false when the value is null or unusable.
func (r *reader) text(n *yaml.Node, field string) (text, bool) {
	n = deref(n)
	if isNull(n) {
		return text{}, false
	}
	if n.Kind != yaml.ScalarNode {
		r.errorf(n.Line, field, "must be a single value, not a %s", kindName(n))
		return text{}, false
	}
	return r.expand(n.Value, n.Line, field)
}

// expand applies ${VAR} interpolation when the reader has a lookup.
func (r *reader) expand(s string, line int, field string) (text, bool) {
	if r.lookup == nil {
		return text{s: s}, true
	}
	x, err := interpolate(s, r.lookup)
	if err != nil {
		r.errorf(line, field, "%v", err)
		return text{}, false
	}
	for _, name := range x.missing {
		r.envErrorf(line, field, "variable %s (in ${%s}) is not set; export it, %s, or give a default with ${%s:-value}",
			name, name, r.envFileHint(), name)
	}
	if len(x.missing) > 0 {
		return text{}, false
	}
	r.noteTaken(x.taken...)
	return text{s: x.value, fromEnv: x.fromEnv, spans: x.spans}, true
}

// envFileHint says where else a variable could come from.
func (r *reader) envFileHint() string {
	if r.envFile != "" {
		return "add it to env_file " + r.envFile
	}
	return "add it to an env_file"
}

// boolean reads true/false.
func (r *reader) boolean(n *yaml.Node, field string) (bool, bool) {
	t, ok := r.text(n, field)
	if !ok {
		return false, false
	}
	b, err := strconv.ParseBool(t.s)
	if err != nil {
		r.errorf(n.Line, field, "%s is not a boolean; use true or false", t.quoted())
		return false, false
	}
	return b, true
}

// count reads a non-negative integer.
func (r *reader) count(n *yaml.Node, field string) (int, bool) {
	t, ok := r.text(n, field)
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(t.s)
	if err != nil || v < 0 {
		r.errorf(n.Line, field, "%s is not a non-negative whole number; use 0 or more (0 means no limit)", t.quoted())
		return 0, false
	}
	return v, true
}

// duration reads a duration in any accepted form.
func (r *reader) duration(n *yaml.Node, field string) (time.Duration, bool) {
	t, ok := r.text(n, field)
	if !ok {
		return 0, false
	}
	d, err := ParseDuration(t.s)
	if err != nil {
		r.errorf(n.Line, field, "%s is not a valid duration (%v); %s", t.quoted(), err, durationForms)
		return 0, false
	}
	return d, true
}

// list reads a sequence of scalar strings.
func (r *reader) list(n *yaml.Node, field string) ([]text, bool) {
	n = deref(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		r.errorf(n.Line, field, "must be a list, e.g. [a, b]")
		return nil, false
	}
	out := make([]text, 0, len(n.Content))
	ok := true
	for i, item := range n.Content {
		t, good := r.text(item, fmt.Sprintf("%s[%d]", field, i))
		if !good {
			if isNull(item) {
				r.errorf(item.Line, fmt.Sprintf("%s[%d]", field, i), "empty list item; remove it or give it a value")
			}
			ok = false
			continue
		}
		out = append(out, t)
	}
	return out, ok
}

// strings reads a sequence of strings, dropping the secret marks (for names and patterns).
func (r *reader) strings(n *yaml.Node, field string) []string {
	items, _ := r.list(n, field)
	if len(items) == 0 {
		return nil
	}
	out := make([]string, len(items))
	for i, t := range items {
		out[i] = t.s
	}
	return out
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "value"
	}
}
