package naming

import "fmt"

// Admit applies whitelist/blacklist patterns to a name (or a resource URI)
// with the rules tools follow: a non-empty whitelist alone admits only its
// matches; with a blacklist, blacklisted names are dropped unless also
// whitelisted. It returns the pattern that decided a rejection.
func Admit(whitelist, blacklist []string, name string) (ok bool, field, pattern string) {
	_, inWhite := matchAny(whitelist, name)
	if len(blacklist) == 0 {
		if len(whitelist) == 0 || inWhite {
			return true, "", ""
		}
		return false, "whitelist", ""
	}
	black, inBlack := matchAny(blacklist, name)
	if !inBlack || inWhite {
		return true, "", ""
	}
	return false, "blacklist", black
}

// ApplyPrompts plans a server's prompts as Apply does its tools: rules'
// Whitelist and Blacklist filter the original names (the server's prompts
// filter), its transforms rename them, both names must be valid, two
// prompts of one server may not share an exported name (an error), and a
// name another server owns stays with it (a warning). Strict mode and
// per-tool settings do not apply. Filtered-out prompts are not reported:
// the filter says what is wanted.
func ApplyPrompts(rules Rules, upstream []string, owner func(exported string) (server string, taken bool)) Plan {
	p := planner{rules: rules}
	valid, err := compilePattern(rules.ValidPattern)
	if err != nil {
		p.fail("", "naming.valid_pattern", "%v; fix naming.valid_pattern or remove it to use %s", err, DefaultValidPattern)
		return p.plan
	}
	seen := make(map[string]bool, len(upstream))
	byExported := make(map[string]string, len(upstream))
	for _, name := range upstream {
		if seen[name] {
			p.fail(name, "", "the server lists prompt %q more than once; it cannot be exported under one name", name)
			continue
		}
		seen[name] = true
		if ok, _, _ := Admit(rules.Whitelist, rules.Blacklist, name); !ok {
			continue
		}
		if !valid.MatchString(name) {
			p.warn(name, "", "prompt %q does not match %s; it is skipped (filter it out with prompts.blacklist to silence this)", name, valid)
			continue
		}
		exported := Rename(name, rules.Transforms)
		if !valid.MatchString(exported) {
			p.warn(name, "transform", "the exported prompt name %q does not match %s; it is skipped; shorten or change the transform", exported, valid)
			continue
		}
		if other, dup := byExported[exported]; dup {
			p.fail(name, "transform", "prompts %q and %q are both exported as %q; change the transforms or filter one out", other, name, exported)
			continue
		}
		byExported[exported] = name
		if owner != nil {
			if server, taken := owner(exported); taken && server != rules.Server {
				p.warn(name, "", "%s", fmt.Sprintf("prompt name %q is already owned by %q, which keeps it; the prompt from server %q is skipped; add a prefix transform to one of them", exported, server, rules.Server))
				continue
			}
		}
		p.plan.Tools = append(p.plan.Tools, Tool{Original: name, Exported: exported})
	}
	return p.plan
}
