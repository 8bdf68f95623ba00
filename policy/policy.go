package policy

import (
	"fmt"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// Action is what a rule does to the calls it matches.
type Action uint8

// The actions. The zero Action allows.
const (
	Allow Action = iota
	Deny
	Ask
)

// String names a as the config writes it.
func (a Action) String() string {
	switch a {
	case Deny:
		return "deny"
	case Ask:
		return "ask"
	}
	return "allow"
}

// ParseAction reads an action as the config writes it.
func ParseAction(s string) (Action, bool) {
	switch s {
	case "allow":
		return Allow, true
	case "deny":
		return Deny, true
	case "ask":
		return Ask, true
	}
	return Allow, false
}

// Rule is one rule as the config gives it.
type Rule struct {
	Name    string
	When    string // a CEL expression of type bool
	Action  Action
	Message string // shown to the client with a denial
	// Timeout is how long an ask rule waits for the client's answer; 0:
	// DefaultAskTimeout.
	Timeout time.Duration
	Line    int // where the rule is in its file, for errors
}

// DefaultAskTimeout is how long an ask rule that sets no timeout waits for
// the client's answer; MaxAskTimeout is the longest a rule may set (a
// protocol 2026-07-28 client's question is held no longer).
const (
	DefaultAskTimeout = 2 * time.Minute
	MaxAskTimeout     = 10 * time.Minute
)

// maxCost bounds the work one rule's evaluation may do (CEL's cost units):
// a rule is a predicate over one call, never a computation.
const maxCost = 100_000

// CompileError is a rule whose expression does not compile: a syntax error,
// an unknown name, or a type that is not bool.
type CompileError struct {
	Rule    string
	Line    int // the rule's line in its file
	Message string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("rule %q: %s", e.Rule, e.Message)
}

// compiled is one rule ready to evaluate.
type compiled struct {
	Rule
	prg cel.Program
}

// Set is the compiled rules of one config, in order. A nil Set allows
// everything. Safe for concurrent use.
type Set struct {
	rules []compiled
}

// env is the CEL environment every rule is compiled in: the variables a
// rule may read.
var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("principal", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("server", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("original", cel.StringType),
		cel.Variable("method", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		panic(err)
	}
	return e
}()

// Compile compiles rules; every rule that does not compile is reported,
// with the line of the expression's error within the rule's file when the
// expression spans lines.
func Compile(rules []Rule) (*Set, []*CompileError) {
	if len(rules) == 0 {
		return nil, nil
	}
	s := &Set{rules: make([]compiled, 0, len(rules))}
	var errs []*CompileError
	for _, r := range rules {
		prg, err := compileOne(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.rules = append(s.rules, compiled{Rule: r, prg: prg})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

func compileOne(r Rule) (cel.Program, *CompileError) {
	fail := func(line int, format string, args ...any) *CompileError {
		return &CompileError{Rule: r.Name, Line: line, Message: fmt.Sprintf(format, args...)}
	}
	ast, iss := env.Compile(r.When)
	if iss != nil && iss.Err() != nil {
		e := iss.Errors()[0]
		line := r.Line
		msg := e.Message
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			msg = fmt.Sprintf("%s (at column %d of the expression)", e.Message, loc.Column()+1)
		}
		more := ""
		if n := len(iss.Errors()); n > 1 {
			more = fmt.Sprintf(" (and %d more)", n-1)
		}
		return nil, fail(line, "when: %s%s; a rule reads principal (issuer, subject, client, claims), server, tool, original, method and args", msg, more)
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fail(r.Line, "when: the expression is of type %s, and must be true or false (bool)", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(maxCost), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fail(r.Line, "when: %v", err)
	}
	return prg, nil
}

// Len is how many rules s has.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Call is what a rule sees of one tool call.
type Call struct {
	Caller   identity.Caller
	Server   string
	Tool     string // the exported name
	Original string // the upstream's name
	Method   string // "tools/call"
	Args     map[string]any
}

// Decision is what the rules decided for a call: the first matching rule's
// action, name and message; Allow with no Rule when none matched.
type Decision struct {
	Action  Action
	Rule    string
	Message string
	// Timeout is how long an ask waits for the client's answer.
	Timeout time.Duration
}

// Decide evaluates the rules in order; the first that is true decides. A
// deny or ask rule whose evaluation fails (a missing argument or claim it
// reads without has(), a value of another type, its cost limit) denies,
// and an allow rule that fails does not match: a rule never lets a call
// through by failing.
func (s *Set) Decide(c Call) Decision {
	if s == nil || len(s.rules) == 0 {
		return Decision{}
	}
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	claims := c.Caller.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	vars := map[string]any{
		"principal": map[string]any{"issuer": c.Caller.Principal.Issuer, "subject": subjectOf(c.Caller.Principal),
			"client": c.Caller.Client, "claims": claims, "kind": kindOf(c.Caller.Principal)},
		"server": c.Server, "tool": c.Tool, "original": c.Original, "method": c.Method, "args": args,
	}
	act, err := cel.NewActivation(vars)
	if err != nil {
		return Decision{Action: Deny, Rule: s.rules[0].Name, Message: "the call could not be checked"}
	}
	for _, r := range s.rules {
		out, _, err := r.prg.Eval(act)
		if err != nil {
			if r.Action == Allow {
				continue
			}
			return Decision{Action: Deny, Rule: r.Name, Message: "the rule could not be evaluated for this call: " + evalReason(err)}
		}
		if out == types.True {
			d := Decision{Action: r.Action, Rule: r.Name, Message: r.Message}
			if r.Action == Ask {
				d.Timeout = r.Timeout
				if d.Timeout <= 0 {
					d.Timeout = DefaultAskTimeout
				}
			}
			return d
		}
		if _, ok := out.Value().(bool); !ok {
			return Decision{Action: Deny, Rule: r.Name, Message: "the rule's expression is not true or false for this call"}
		}
	}
	return Decision{}
}

// subjectOf is the subject a rule sees: an OAuth token's sub, a static
// token's client name, "" for anyone else.
func subjectOf(p identity.Principal) string {
	if p.Kind == identity.KindClient {
		return p.Name
	}
	return p.Subject
}

// kindOf names p's kind for rules: "subject", "client", "address", "local".
func kindOf(p identity.Principal) string {
	switch p.Kind {
	case identity.KindSubject:
		return "subject"
	case identity.KindClient:
		return "client"
	case identity.KindAddress:
		return "address"
	case identity.KindLocal:
		return "local"
	}
	return ""
}

// evalReason is a short reason an evaluation failed, without the values
// it was given (they may be secrets).
func evalReason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no such key"):
		return "it reads an argument or claim the call does not have (guard it with has(args.NAME))"
	case strings.Contains(msg, "no such overload"), strings.Contains(msg, "no matching overload"):
		return "it compares values of different types"
	case strings.Contains(msg, "cost limit"):
		return "it does too much work"
	}
	return "evaluation failed"
}
