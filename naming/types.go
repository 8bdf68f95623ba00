package naming

import (
	"fmt"
	"time"
)

type (
	// Rules is everything naming needs to know about one server.
	Rules struct {
		Server       string
		Whitelist    []string
		Blacklist    []string
		Strict       bool
		Defaults     Settings
		Config       map[string]Settings // keyed by original tool name
		Transforms   []Transform
		ValidPattern string // "" = DefaultValidPattern
		// Reserved is the owner name under which the aggregator's own tools are
		// reported; they keep their names, so a conflict with one is fixed on the
		// upstream side. "" when nothing is reserved.
		Reserved string
	}

	// Settings are per-tool limits; zero values mean "not set".
	Settings struct {
		Timeout      time.Duration
		MaxInstances int
	}

	// Transform is one rename step: Suffix false = prefix (Remove stripped first when present).
	Transform struct {
		Suffix bool
		Add    string
		Remove string
	}

	// Tool is one admitted tool.
	Tool struct {
		Original string
		Exported string
		Settings Settings // per-tool config merged over defaults field by field
	}

	// Plan is the result for one server: admitted tools in upstream order, and problems.
	Plan struct {
		Tools    []Tool
		Problems []Problem
		// Offered counts the distinct tools the upstream listed; Excluded are those the
		// filters dropped. Dropping them is what the config asked for, so they are not
		// problems: Summary reports them in one line.
		Offered  int
		Excluded []Exclusion
		// Yielded are the exported names of admitted tools skipped because another
		// owner held them when the plan was made.
		Yielded []string
		// Failed is true when a per-server error (strict violation, intra-server collision)
		// means the server's update must be rejected as a whole.
		Failed bool
	}

	// Problem is one finding about a server's tools.
	Problem struct {
		Error   bool // false = warning
		Server  string
		Tool    string
		Field   string
		Message string
	}
)

// DefaultValidPattern is the tool name rule shared by the major LLM providers.
const DefaultValidPattern = `^[a-zA-Z0-9_-]{1,64}$`

// String renders the problem on one line.
func (p Problem) String() string {
	sev := "warning"
	if p.Error {
		sev = "error"
	}
	s := fmt.Sprintf("%s: server %q: ", sev, p.Server)
	if p.Tool != "" {
		s += fmt.Sprintf("tool %q: ", p.Tool)
	}
	if p.Field != "" {
		s += p.Field + ": "
	}
	return s + p.Message
}
