package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

func TestDecideFirstMatchWins(t *testing.T) {
	set, errs := Compile([]Rule{
		{Name: "no-prod-deletes", When: `tool == "db_delete" && has(args.env) && args.env == "prod"`, Action: Deny, Message: "open a ticket"},
		{Name: "admins-anything", When: `"admins" in principal.claims.groups`, Action: Allow},
		{Name: "ask-writes", When: `original.startsWith("write")`, Action: Ask},
		{Name: "bot-reads-only", When: `principal.kind == "client" && principal.subject == "ci-bot" && !original.startsWith("read")`, Action: Deny},
	})
	require.Empty(t, errs)
	require.Equal(t, 4, set.Len())
	alice := identity.Caller{Principal: identity.Subject("https://id.example", "alice"), Client: "app",
		Claims: map[string]any{"groups": []any{"staff"}}}
	admin := identity.Caller{Principal: identity.Subject("https://id.example", "root"), Client: "app",
		Claims: map[string]any{"groups": []any{"admins"}}}
	for _, tc := range []struct {
		name string
		call Call
		want Decision
	}{
		{"denied by an argument's value", Call{Caller: alice, Tool: "db_delete", Original: "delete", Args: map[string]any{"env": "prod"}},
			Decision{Action: Deny, Rule: "no-prod-deletes", Message: "open a ticket"}},
		{"another value passes", Call{Caller: alice, Tool: "db_delete", Original: "delete", Args: map[string]any{"env": "dev"}}, Decision{}},
		{"an earlier rule decides", Call{Caller: admin, Tool: "db_write", Original: "write"}, Decision{Action: Allow, Rule: "admins-anything"}},
		{"ask", Call{Caller: alice, Tool: "db_write", Original: "write"}, Decision{Action: Ask, Rule: "ask-writes", Timeout: DefaultAskTimeout}},
		{"a static client", Call{Caller: identity.ClientCaller("ci-bot"), Tool: "db_list", Original: "list"}, Decision{Action: Deny, Rule: "bot-reads-only"}},
		{"no rule matches", Call{Caller: identity.LocalCaller(), Tool: "db_read", Original: "read"}, Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, set.Decide(tc.call))
		})
	}
}

// TestDecideFailsClosed: a rule that cannot be evaluated for a call (it
// reads an argument the call lacks) denies rather than letting it through.
func TestDecideFailsClosed(t *testing.T) {
	set, errs := Compile([]Rule{{Name: "reads-env", When: `args.env == "prod"`, Action: Deny}})
	require.Empty(t, errs)
	d := set.Decide(Call{Tool: "x", Args: map[string]any{}})
	assert.Equal(t, Deny, d.Action)
	assert.Equal(t, "reads-env", d.Rule)
	assert.Contains(t, d.Message, "has(args.NAME)")
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, when, want string
	}{
		{"syntax", `tool == `, "Syntax error"},
		{"unknown name", `tol == "x"`, "undeclared reference to 'tol'"},
		{"not bool", `tool + "x"`, "must be true or false"},
		{"type", `tool == 3`, "found no matching overload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, errs := Compile([]Rule{{Name: "r", When: tc.when, Line: 7}})
			assert.Nil(t, set)
			require.Len(t, errs, 1)
			assert.Equal(t, 7, errs[0].Line)
			assert.Contains(t, errs[0].Message, tc.want)
		})
	}
}

func TestNilSetAllows(t *testing.T) {
	var s *Set
	assert.Equal(t, Decision{}, s.Decide(Call{Tool: "x"}))
}

// BenchmarkDecideTenRules: ten rules, none matching, the common case.
func BenchmarkDecideTenRules(b *testing.B) {
	rules := make([]Rule, 10)
	for i := range rules {
		rules[i] = Rule{Name: string(rune('a' + i)), When: `tool == "never" && has(args.env) && args.env == "prod"`, Action: Deny}
	}
	set, errs := Compile(rules)
	require.Empty(b, errs)
	call := Call{Caller: identity.ClientCaller("x"), Tool: "t", Original: "t", Args: map[string]any{"env": "dev"}}
	b.ReportAllocs()
	for b.Loop() {
		set.Decide(call)
	}
}
