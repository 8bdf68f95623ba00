package naming

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Apply builds the plan for one server. upstream lists the tool names the server reported,
// in its order. owner tells whether an exported name already belongs to another server (or
// is reserved, e.g. by the admin toolset); it may be nil when nothing is taken. A name the
// owner reports as belonging to rules.Server itself is not a conflict: that is the server's
// own previous catalog being replaced.
//
// Settings are the tool's Config entry merged over Defaults field by field, in both modes.
func Apply(rules Rules, upstream []string, owner func(exported string) (server string, taken bool)) Plan {
	p, valid := newPlanner(rules)
	if valid == nil {
		return p.plan
	}
	if len(upstream) == 0 {
		p.warn("", "", "server returned no tools; check that it started correctly and offers tools")
	}

	offered := make(map[string]bool, len(upstream))
	byExported := make(map[string]string, len(upstream)) // exported name -> original
	words := exportWords{
		invalid:   "the exported name %q does not match %s; the tool is skipped; shorten or change the transform",
		duplicate: "tools %q and %q are both exported as %q; change the transforms so every tool gets its own name, or filter one out",
		taken: func(name, exported, server string) {
			fix := "add a prefix transform to one of them"
			if rules.Reserved != "" && server == rules.Reserved {
				fix = fmt.Sprintf("the aggregator's own tools keep their names: add a prefix transform to server %q, or set admin.enabled: false", rules.Server)
			}
			p.warn(name, "", "exported name %q is already owned by %q, which keeps it; the tool from server %q is skipped; %s", exported, server, rules.Server, fix)
			p.plan.Yielded = append(p.plan.Yielded, exported)
		},
	}
	for _, name := range upstream {
		if offered[name] {
			p.fail(name, "", "the server lists this tool more than once; it cannot be exported under one name")
			continue
		}
		offered[name] = true
		p.plan.Offered++

		if !p.admitted(name) {
			continue
		}
		if !valid.MatchString(name) {
			p.warn(name, "", "the upstream name does not match %s; the tool is skipped (names are never rewritten automatically; filter it out with tools.blacklist to silence this)", valid)
			continue
		}
		settings, configured := p.settings(name)
		if rules.Strict && !configured {
			p.fail(name, "tools.config", "%s", p.strictMessage(name))
			continue
		}
		exported, ok := p.export(name, valid, byExported, owner, words)
		if !ok {
			continue
		}
		p.plan.Tools = append(p.plan.Tools, Tool{Original: name, Exported: exported, Settings: settings})
	}

	for _, name := range sortedKeys(rules.Config) {
		if !offered[name] {
			p.warn(name, "tools.config."+name, "configured, but the server does not offer this tool; remove the entry or check the name")
		}
	}
	return p.plan
}

// planner accumulates a Plan for one server.
type planner struct {
	rules Rules
	plan  Plan
}

// newPlanner starts the plan of rules and compiles their valid pattern; a
// pattern that does not compile leaves valid nil and the plan with its error.
func newPlanner(rules Rules) (p *planner, valid *regexp.Regexp) {
	p = &planner{rules: rules}
	valid, err := compilePattern(rules.ValidPattern)
	if err != nil {
		p.fail("", "naming.valid_pattern", "%v; fix naming.valid_pattern or remove it to use %s", err, DefaultValidPattern)
		return p, nil
	}
	return p, valid
}

// exportWords are what export says of the items it skips, in the words of
// their kind (tools, prompts).
type exportWords struct {
	invalid   string                              // a warning: the exported name, the valid pattern
	duplicate string                              // an error: the other original name, this one, the exported name
	taken     func(name, exported, server string) // reports the item whose exported name server keeps
}

// export renames the original name by the rules' transforms and checks what
// comes out: a valid name, not one another of the server's items is already
// exported as (byExported, which it records the name in), not one owner says
// another server has. It returns the exported name, or false when the item
// is skipped, the problem recorded.
func (p *planner) export(name string, valid *regexp.Regexp, byExported map[string]string,
	owner func(exported string) (server string, taken bool), words exportWords) (string, bool) {
	exported := Rename(name, p.rules.Transforms)
	if !valid.MatchString(exported) {
		p.warn(name, "transform", words.invalid, exported, valid)
		return "", false
	}
	if other, dup := byExported[exported]; dup {
		p.fail(name, "transform", words.duplicate, other, name, exported)
		return "", false
	}
	byExported[exported] = name
	if owner != nil {
		if server, taken := owner(exported); taken && server != p.rules.Server {
			words.taken(name, exported, server)
			return "", false
		}
	}
	return exported, true
}

// admitted applies the whitelist/blacklist rules to an original tool name and records
// every tool it drops as an exclusion (see Plan.Summary).
func (p *planner) admitted(name string) bool {
	ok, field, pattern := Admit(p.rules.Whitelist, p.rules.Blacklist, name)
	if !ok {
		p.plan.Excluded = append(p.plan.Excluded, Exclusion{Tool: name, By: "tools." + field, Pattern: pattern})
	}
	return ok
}

// settings merges the tool's Config entry over Defaults and reports whether it had one.
func (p *planner) settings(name string) (Settings, bool) {
	s := p.rules.Defaults
	c, ok := p.rules.Config[name]
	if !ok {
		return s, false
	}
	if c.Timeout != 0 {
		s.Timeout = c.Timeout
	}
	if c.MaxInstances != 0 {
		s.MaxInstances = c.MaxInstances
	}
	return s, true
}

// strictMessage explains a strict-mode violation and the two ways out.
func (p *planner) strictMessage(tool string) string {
	configured := sortedKeys(p.rules.Config)
	list := "none"
	if len(configured) > 0 {
		list = strings.Join(configured, ", ")
	}
	return fmt.Sprintf("tool %q offered by server %q is not configured.\n"+
		"  mode: strict\n"+
		"  missing tool: %s\n"+
		"  configured tools: [%s]\n"+
		"to resolve:\n"+
		"  1. add tools.config.%s to the server's config, or\n"+
		"  2. set tools.mode to dynamic (unconfigured tools then use tools.defaults)",
		tool, p.rules.Server, tool, list, tool)
}

func (p *planner) warn(tool, field, format string, args ...any) {
	p.add(false, tool, field, format, args...)
}

func (p *planner) fail(tool, field, format string, args ...any) {
	p.plan.Failed = true
	p.add(true, tool, field, format, args...)
}

func (p *planner) add(isError bool, tool, field, format string, args ...any) {
	p.plan.Problems = append(p.plan.Problems, Problem{
		Error:   isError,
		Server:  p.rules.Server,
		Tool:    shorten(tool, maxShownName),
		Field:   field,
		Message: shorten(fmt.Sprintf(format, args...), maxShownMessage),
	})
}

// A problem quotes what an upstream sent, which may be of any length: a
// name or a message is cut to these many bytes, saying how long it was.
const (
	maxShownName    = 200
	maxShownMessage = 2048
)

// shorten cuts s to at most max bytes (at a rune boundary), saying how many
// there were.
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// compilePattern compiles the validity rule, defaulting to DefaultValidPattern.
func compilePattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		pattern = DefaultValidPattern
	}
	return regexp.Compile(pattern)
}

func sortedKeys(m map[string]Settings) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
