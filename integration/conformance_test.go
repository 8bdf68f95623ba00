package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"

	"github.com/stretchr/testify/require"
)

// conformanceMode is one way the suite reaches mcp-go's conformance server.
type conformanceMode struct {
	name    string // its column in the table
	through bool   // through the aggregator, not directly
	shared  bool   // through: the upstream is truely-stateless (one shared instance), not leased
}

// conformanceModes are the columns of the table; the first one is the reference.
func conformanceModes() []conformanceMode {
	return []conformanceMode{
		{name: "direct"},
		{name: "shared", through: true, shared: true},
		{name: "leased", through: true},
	}
}

// flakyAttempts bounds the runs of a scenario that is flaky against mcp-go itself.
// Directly, such a scenario loses its last notification in about half the runs.
// Behind the aggregator it loses more: mcp-go's server feeds one notification
// channel per session to the call's stream and the standalone GET stream alike,
// and the aggregator keeps a GET stream open (it must, to hear of list changes),
// so a share of a call's notifications leaves on that stream instead
// (notify_order_test.go counts it). 0.8^30 is below 0.2%; a bound of 5 would fail
// a correct aggregator every third run.
const flakyAttempts = 30

// flakyAgainstMCPGo reports whether scenario fails against mcp-go v1.2.1's own
// conformance server in many runs: its HTTP server sometimes drops the last
// notification a tool sends just before the tool's response, and sends some of a
// call's notifications on the session's GET stream when one is open.
func flakyAgainstMCPGo(scenario string) bool {
	switch scenario {
	case "tools-call-with-progress", "tools-call-with-logging":
		return true
	}
	return false
}

// TestConformance runs every server scenario of the official MCP conformance suite
// against mcp-go's conformance server directly, and through the aggregator with that
// server as a shared and as a leased upstream, and asserts that the aggregator loses
// nothing: every scenario that passes directly passes through it, in both modes. The
// table of verdicts is logged and written to conformance.txt in the test's temporary
// directory, whose path is printed.
func TestConformance(t *testing.T) {
	requireSlow(t)
	t.Parallel()
	suite := newConformanceSuite(t)
	scenarios := suite.scenarios(t)
	server := buildConformanceServer(t)

	// The modes run in parallel, each against a conformance server of its own; each
	// writes only its own slot, and t.Run returns after all of them.
	modes := conformanceModes()
	results := make([]map[string]scenarioResult, len(modes))
	t.Run("modes", func(t *testing.T) {
		for i, mode := range modes {
			t.Run(mode.name, func(t *testing.T) {
				t.Parallel()
				url := startConformanceServer(t, server)
				if mode.through {
					a := serveConfig(t, httpTransport, conformanceConfig(url, mode.shared))
					a.waitLoaded()
					url = a.url
				}
				results[i] = runConformance(t, suite, scenarios, url)
			})
		}
	})

	table := conformanceTable(scenarios, modes, results)
	path := filepath.Join(t.TempDir(), "conformance.txt")
	require.NoError(t, os.WriteFile(path, []byte(table), 0o644))
	t.Logf("MCP conformance suite:\n%s", table)
	fmt.Printf("MCP conformance table written to %s\n", path)

	direct := results[0]
	passedDirectly := 0
	for _, name := range scenarios {
		if !direct[name].passed {
			continue
		}
		passedDirectly++
		for i, mode := range modes[1:] {
			got := results[i+1][name]
			switch {
			case got.passed:
			case flakyAgainstMCPGo(name) && got.lostSome:
				// Every run lost some of the tool's notifications, and nothing
				// else failed: mcp-go's server hands a share of a call's
				// notifications to the session's GET stream, which the
				// aggregator keeps open. TestCallNotificationsBeforeResponse
				// holds the aggregator to its own guarantee with an upstream
				// that keeps them on the call's stream; this is reported, not
				// failed.
				t.Logf("%s passes directly but lost notifications in all %d runs through the aggregator with the upstream %s: %s",
					name, got.attempts, mode.name, strings.Join(got.problems, "; "))
			default:
				t.Errorf("%s passes directly but fails through the aggregator with the upstream %s: %s",
					name, mode.name, strings.Join(got.problems, "; "))
			}
		}
	}
	if passedDirectly == 0 {
		t.Errorf("no scenario passes directly: the suite or mcp-go's conformance server is broken")
	}
}

// conformanceConfig is an aggregator config whose one server is the conformance
// server at url, shared by every session or leased to each. The suite's client never
// ends a session (no DELETE, no mcp_release), so each scenario's lease lives until
// the session idles out; lease.max_instances is lifted so that the thirty-odd
// sessions of one run do not hit the cap on leased instances, which is not what
// this test is about.
func conformanceConfig(url string, shared bool) string {
	return fmt.Sprintf(`version: 1
servers:
  conformance:
    transport: streamable_http
    url: %s
    truely-stateless: %t
    lease: {max_instances: 0}
`, quoted(url), shared)
}

// runConformance runs every scenario against url: the whole suite once, then each
// scenario that is flaky against mcp-go and failed only by losing some of its
// notifications again, until it passes, fails otherwise or has run flakyAttempts
// times. Those scenarios retry in parallel, each on its own goroutine writing only
// its own result.
func runConformance(t *testing.T, suite *conformanceSuite, scenarios []string, url string) map[string]scenarioResult {
	t.Helper()
	all := suite.runAll(t, url)
	results := make([]scenarioResult, len(scenarios))
	var retries sync.WaitGroup
	for i, name := range scenarios {
		r, ok := all[name]
		if !ok {
			r = scenarioResult{attempts: 1, problems: []string{"the suite wrote no result"}}
		}
		results[i] = r
		if !flakyAgainstMCPGo(name) || !r.lostSome {
			continue
		}
		retries.Add(1)
		go func() {
			defer retries.Done()
			for r.lostSome && r.attempts < flakyAttempts {
				again := suite.runOne(t, url, name)
				again.attempts = r.attempts + 1
				r = again
			}
			results[i] = r
		}()
	}
	retries.Wait()

	byName := make(map[string]scenarioResult, len(scenarios))
	for i, name := range scenarios {
		byName[name] = results[i]
	}
	return byName
}

// conformanceTable renders the verdicts, one row per scenario and one column per
// mode, then a count per mode and the problems behind every failure and warning.
func conformanceTable(scenarios []string, modes []conformanceMode, results []map[string]scenarioResult) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := []string{"scenario"}
	for _, mode := range modes {
		header = append(header, mode.name)
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	passed := make([]int, len(modes))
	for _, name := range scenarios {
		row := []string{name}
		for i := range modes {
			r := results[i][name] // a mode that never ran has a nil map: attempts 0
			if r.passed {
				passed[i]++
			}
			row = append(row, verdict(r))
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	total := []string{"passed"}
	for i := range modes {
		total = append(total, fmt.Sprintf("%d/%d", passed[i], len(scenarios)))
	}
	fmt.Fprintln(w, strings.Join(total, "\t"))
	_ = w.Flush()

	for i, mode := range modes {
		for _, name := range scenarios {
			for _, p := range results[i][name].problems {
				fmt.Fprintf(&b, "%s %s: %s\n", mode.name, name, p)
			}
		}
	}
	return b.String()
}

// verdict is one cell of the table.
func verdict(r scenarioResult) string {
	switch {
	case r.attempts == 0:
		return "not run"
	case r.passed && r.attempts == 1:
		return "pass"
	case r.passed:
		return fmt.Sprintf("pass (run %d)", r.attempts)
	case r.attempts == 1:
		return "FAIL"
	default:
		return fmt.Sprintf("FAIL (%d runs)", r.attempts)
	}
}
