package naming

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
	p, valid := newPlanner(rules)
	if valid == nil {
		return p.plan
	}
	seen := make(map[string]bool, len(upstream))
	byExported := make(map[string]string, len(upstream))
	words := exportWords{
		invalid:   "the exported prompt name %q does not match %s; it is skipped; shorten or change the transform",
		duplicate: "prompts %q and %q are both exported as %q; change the transforms or filter one out",
		taken: func(name, exported, server string) {
			p.warn(name, "", "prompt name %q is already owned by %q, which keeps it; the prompt from server %q is skipped; add a prefix transform to one of them", exported, server, rules.Server)
		},
	}
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
		exported, ok := p.export(name, valid, byExported, owner, words)
		if !ok {
			continue
		}
		p.plan.Tools = append(p.plan.Tools, Tool{Original: name, Exported: exported})
	}
	return p.plan
}
