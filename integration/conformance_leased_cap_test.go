package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestConformanceLeasedAtDefaultCap runs the official conformance suite against
// mcp-go's conformance server directly, and through the aggregator with that server
// as a leased upstream at the default lease settings (lease.max_instances 16, no
// lease.queue_timeout), and asserts that every scenario that passes directly passes
// through. The suite's client opens a session per scenario and never ends one, and
// a run takes a few seconds: the scenarios after the 16th that lease find every
// lease taken and used within the last 10 seconds. Each waits for the first of those
// leases to go 10 seconds unused, and reclaims it, rather than being refused.
func TestConformanceLeasedAtDefaultCap(t *testing.T) {
	requireSlow(t)
	t.Parallel()
	suite := newConformanceSuite(t)
	scenarios := suite.scenarios(t)
	server := buildConformanceServer(t)

	modes := []conformanceMode{{name: "direct"}, {name: "leased, default lease settings", through: true}}
	results, aggregators := runConformanceModes(t, suite, scenarios, server, modes, func(url string, _ conformanceMode) string {
		return fmt.Sprintf(`version: 1
servers:
  conformance:
    transport: streamable_http
    url: %s
    truely-stateless: false
`, quoted(url))
	})
	a := aggregators[1]
	t.Logf("MCP conformance suite:\n%s", conformanceTable(scenarios, modes, results))

	direct, through := results[0], results[1]
	var refused []string
	passedDirectly, passedThrough := 0, 0
	for _, name := range scenarios {
		got := through[name]
		if strings.Contains(strings.Join(got.problems, " "), "lease.max_instances") {
			refused = append(refused, name)
		}
		if got.passed {
			passedThrough++
		}
		if !direct[name].passed {
			continue
		}
		passedDirectly++
		switch {
		case got.passed:
		case got.upstreamLost:
			// As in TestConformance: the upstream itself left a notification
			// off the call's stream in every run, and the aggregator delivered
			// every one it sent there.
			t.Logf("%s: in all %d runs through the aggregator, mcp-go's server left a notification off the call's stream; the aggregator delivered every one it sent there",
				name, got.attempts)
		default:
			t.Errorf("%s passes directly but fails through the aggregator with the upstream leased at the default lease settings: %s",
				name, strings.Join(got.problems, "; "))
		}
	}
	sort.Strings(refused)
	reclaimed := 0
	if a != nil {
		reclaimed = len(leaseEvents(a, "reclaimed", "conformance"))
	}
	t.Logf("passed directly %d/%d, through %d/%d; %d refused for lease.max_instances %v; %d leases reclaimed",
		passedDirectly, len(scenarios), passedThrough, len(scenarios), len(refused), refused, reclaimed)
	if passedDirectly == 0 {
		t.Errorf("no scenario passes directly: the suite or mcp-go's conformance server is broken")
	}
	if len(refused) > 0 {
		t.Errorf("scenarios refused for lease.max_instances at the default settings: %v", refused)
	}
}
