package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/policy"
)

func TestPolicyLoads(t *testing.T) {
	ws, problems := loadYAML(t, `version: 1
policy:
  - name: no-prod
    when: 'tool == "db_delete" && args.env == "prod"'
    action: deny
    message: open a ticket
  - {name: ask-writes, when: 'original.startsWith("write")', action: ask}
  - {name: ask-slowly, when: 'tool == "deploy"', action: ask, timeout: 5m}
`+accessServers, nil)
	require.NotNil(t, ws, render(problems))
	assert.Empty(t, problems, render(problems))
	require.Equal(t, 3, ws.Policy.Len())
	assert.Equal(t, []policy.Rule{
		{Name: "no-prod", When: `tool == "db_delete" && args.env == "prod"`, Action: policy.Deny, Message: "open a ticket", Line: 3},
		{Name: "ask-writes", When: `original.startsWith("write")`, Action: policy.Ask, Line: 7},
		{Name: "ask-slowly", When: `tool == "deploy"`, Action: policy.Ask, Timeout: 5 * time.Minute, Line: 8},
	}, ws.PolicyRules)
	assert.Equal(t, policy.DefaultAskTimeout, ws.Policy.Decide(policy.Call{Original: "write_file"}).Timeout, "an ask rule without a timeout")
	assert.Equal(t, 5*time.Minute, ws.Policy.Decide(policy.Call{Tool: "deploy"}).Timeout)
}

// TestPolicyProblems: a rule that does not compile, or is not whole, voids
// the config (a reload keeps the last good one), and the problem points at
// the file and line of the expression.
func TestPolicyProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, field string
		line              int
		contains          string
	}{
		{"syntax error", "policy:\n  - name: r\n    action: deny\n    when: 'tool =='\n", "policy.r.when", 5, "Syntax error"},
		{"type error", "policy:\n  - name: r\n    when: 'tool == 3'\n    action: deny\n", "policy.r.when", 4, "no matching overload"},
		{"unknown variable", "policy:\n  - {name: r, when: 'tol == \"x\"', action: deny}\n", "policy.r.when", 3, "undeclared reference"},
		{"not bool", "policy:\n  - {name: r, when: 'tool', action: deny}\n", "policy.r.when", 3, "true or false"},
		{"bad action", "policy:\n  - {name: r, when: 'true', action: block}\n", "policy.r.action", 3, "allow, deny or ask"},
		{"no when", "policy:\n  - {name: r, action: deny}\n", "policy[0].when", 3, "required"},
		{"same name twice", "policy:\n  - {name: r, when: 'true', action: deny}\n  - {name: r, when: 'false', action: deny}\n", "policy[1].name", 4, "also named at line 3"},
		{"not a list", "policy: {name: r}\n", "policy", 2, "must be a list"},
		{"timeout on a deny rule", "policy:\n  - {name: r, when: 'true', action: deny, timeout: 1m}\n", "policy.r.timeout", 3, "action: ask only"},
		{"timeout too long", "policy:\n  - {name: r, when: 'true', action: ask, timeout: 1h}\n", "policy.r.timeout", 3, "at most 10m0s"},
		{"timeout zero", "policy:\n  - {name: r, when: 'true', action: ask, timeout: 0s}\n", "policy.r.timeout", 3, "more than 0"},
		{"timeout not a duration", "policy:\n  - {name: r, when: 'true', action: ask, timeout: soon}\n", "policy.r.timeout", 3, "not a valid duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, problems := loadYAML(t, "version: 1\n"+tc.yaml+accessServers, nil)
			assert.Nil(t, ws, "a bad rule voids the config")
			p := problemAt(t, problems, tc.field)
			assert.Equal(t, SeverityError, p.Severity)
			assert.Equal(t, tc.line, p.Line, p.String())
			assert.NotEmpty(t, p.File)
			assert.Contains(t, p.String(), tc.contains)
		})
	}
}
