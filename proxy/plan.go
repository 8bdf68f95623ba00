package proxy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// plan applies the naming rules to a server's upstream tools against the
// names other servers already own, and renders its catalog entries.
func (p *Proxy) plan(s *config.Server, tools []upstream.Tool, cat *catalog.Catalog, pattern string) (naming.Plan, []*catalog.Entry) {
	names := make([]string, len(tools))
	byName := make(map[string]json.RawMessage, len(tools))
	for i, t := range tools {
		names[i] = t.Name
		byName[t.Name] = t.Raw
	}
	plan, entries := catalog.Plan(s, names, byName, cat, pattern)
	if sum := plan.Summary(); sum != "" {
		// One line per server and plan, however many tools the filters drop.
		p.log.Info(sum, "server", s.ID)
	}
	return plan, entries
}

// startFailure begins the message of a server's start failure.
const startFailure = "could not start: "

func startProblem(s *config.Server, err error) config.Problem {
	// The problem names the server already; the error mostly does too.
	why := strings.TrimPrefix(err.Error(), fmt.Sprintf("server %q: ", s.ID))
	return config.Problem{Severity: config.SeverityError, File: s.File, Line: s.Line, Server: s.ID,
		Message: startFailure + why}
}

// planFailure says in one line why plan, which failed, was rejected: its
// first error, the count of the others, and where to read them all.
func planFailure(plan naming.Plan) string {
	var first string
	n := 0
	for _, np := range plan.Problems {
		if !np.Error {
			continue
		}
		if n == 0 {
			first, _, _ = strings.Cut(np.Message, "\n")
			first = strings.TrimSuffix(first, ".")
		}
		n++
	}
	why := "its tools break the naming rules of its config: " + first
	if n > 1 {
		why += fmt.Sprintf(" (and %d more errors)", n-1)
	}
	return why + "; the problems list says how to resolve each"
}

// exclusionNotes says what the filters kept out of s's catalog, in at most one line.
func exclusionNotes(s *config.Server, plan naming.Plan) []string {
	if sum := plan.Summary(); sum != "" {
		return []string{fmt.Sprintf("server %q: %s", s.ID, sum)}
	}
	return nil
}

// leftOutProblems are warnings about what a server's tool list left out
// (tools whose schemas break MCP, which clients would reject).
func leftOutProblems(s *config.Server, notes []string) []config.Problem {
	out := make([]config.Problem, 0, len(notes))
	for _, note := range notes {
		out = append(out, config.Problem{Severity: config.SeverityWarning, File: s.File, Line: s.Line, Server: s.ID, Message: note})
	}
	return out
}

func namingProblems(s *config.Server, plan naming.Plan) []config.Problem {
	out := make([]config.Problem, 0, len(plan.Problems))
	for _, np := range plan.Problems {
		sev := config.SeverityWarning
		if np.Error {
			sev = config.SeverityError
		}
		out = append(out, config.Problem{Severity: sev, File: s.File, Line: s.Line, Server: s.ID, Tool: np.Tool, Field: np.Field, Message: np.Message})
	}
	return out
}
