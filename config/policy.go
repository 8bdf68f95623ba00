package config

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/mcp-aggregator/mcp-aggregator/policy"
)

// maxPolicyRules bounds the policy list: each rule is evaluated, in order,
// on every tool call.
const maxPolicyRules = 256

// maxWhen bounds one rule's expression.
const maxWhen = 4096

// readPolicy reads the top-level policy list and compiles it: every rule
// whose expression does not compile is an error at its line.
func readPolicy(r *reader, n *yaml.Node) (*policy.Set, []policy.Rule) {
	const want = "a list of {name, when, action, message, timeout}"
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		r.errorf(n.Line, "policy", "must be a list of rules, e.g. - {name: no-prod, when: 'args.env == \"prod\"', action: deny}")
		return nil, nil
	}
	if len(n.Content) > maxPolicyRules {
		r.errorf(n.Line, "policy", "has %d rules, over the %d allowed; merge rules with || in when", len(n.Content), maxPolicyRules)
		return nil, nil
	}
	var rules []policy.Rule
	names := map[string]int{}
	ok := true
	for i, item := range n.Content {
		field := fmt.Sprintf("policy[%d]", i)
		if isNull(item) || !r.mapping(item, field, want) {
			if isNull(item) {
				r.errorf(item.Line, field, "empty rule; remove it or write %s", want)
			}
			ok = false
			continue
		}
		f := r.fields(item, field+".", "name", "when", "action", "message", "timeout")
		get := func(key string, required bool) (string, int) {
			p, present := f[key]
			if !present {
				if required {
					r.errorf(item.Line, field+"."+key, "required; a rule is %s", want)
					ok = false
				}
				return "", item.Line
			}
			t, good := r.text(p.v, field+"."+key)
			if !good {
				ok = false
			}
			return t.s, p.v.Line
		}
		rule := policy.Rule{Line: item.Line}
		rule.Name, _ = get("name", true)
		when, whenLine := get("when", true)
		action, actionLine := get("action", true)
		rule.Message, _ = get("message", false)
		if rule.Name != "" {
			if first, dup := names[rule.Name]; dup {
				r.errorf(item.Line, field+".name", "rule %q is also named at line %d; give each rule its own name, as denials and the audit log name it", rule.Name, first)
				ok = false
			}
			names[rule.Name] = item.Line
			field = "policy." + rule.Name
		}
		if len(when) > maxWhen {
			r.errorf(whenLine, field+".when", "is %d bytes, over the %d allowed", len(when), maxWhen)
			ok = false
			continue
		}
		rule.When = when
		if action != "" {
			a, good := policy.ParseAction(action)
			if !good {
				r.errorf(actionLine, field+".action", "%q is not an action; write allow, deny or ask", action)
				ok = false
			}
			rule.Action = a
		}
		if p, present := f["timeout"]; present {
			d, good := r.duration(p.v, field+".timeout")
			switch {
			case !good:
				ok = false
			case action != "" && rule.Action != policy.Ask:
				r.errorf(p.v.Line, field+".timeout", "applies to action: ask only (how long the client has to answer); remove it, or make the rule ask")
				ok = false
			case d <= 0 || d > policy.MaxAskTimeout:
				r.errorf(p.v.Line, field+".timeout", "must be more than 0 and at most %s (the longest a client's answer is waited for)", policy.MaxAskTimeout)
				ok = false
			default:
				rule.Timeout = d
			}
		}
		if when != "" {
			if _, errs := policy.Compile([]policy.Rule{{Name: rule.Name, When: when, Line: whenLine}}); len(errs) > 0 {
				r.errorf(whenLine, field+".when", "%s", errs[0].Message)
				ok = false
			}
		}
		rules = append(rules, rule)
	}
	if !ok {
		return nil, nil
	}
	set, errs := policy.Compile(rules)
	for _, e := range errs { // compiled one by one above: none is expected
		r.errorf(e.Line, "policy."+e.Rule, "%s", e.Message)
	}
	return set, rules
}
