package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

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
// Such a scenario passes in somewhere between 1 run in 20 and 1 in 2, by the
// machine's load: mcp-go v1.2.1's HTTP server hands the tool's last notification
// to a goroutine that finds the response already written and drops it, unless
// that goroutine happens to run first. It also feeds a session's notifications to
// the standalone GET stream when one is open, as the aggregator's is, where they
// may arrive after the call's response. Through the aggregator, a tap at the
// upstream tells each run where a notification went missing, so a run the upstream
// spoiled is not held against the aggregator, and one the aggregator spoiled fails
// at once.
const flakyAttempts = 30

// flakyNotification is the notification method whose count decides scenario, where
// scenario fails against mcp-go v1.2.1's own conformance server in many runs
// because that server drops the last notification a tool sends just before the
// tool's response; "" for every other scenario.
func flakyNotification(scenario string) string {
	switch scenario {
	case "tools-call-with-progress":
		return "notifications/progress"
	case "tools-call-with-logging":
		return "notifications/message"
	}
	return ""
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
	results, _ := runConformanceModes(t, suite, scenarios, server, modes, func(url string, mode conformanceMode) string {
		return conformanceConfig(url, mode.shared)
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
			case got.upstreamLost:
				// In every run the upstream itself never sent on the call's
				// stream what the client missed, and the aggregator
				// delivered all it sent there: the scenario is as flaky
				// through as directly, and the aggregator lost nothing.
				t.Logf("%s: in all %d runs through the aggregator with the upstream %s, mcp-go's server left a notification off the call's stream; the aggregator delivered every one it sent there",
					name, got.attempts, mode.name)
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

// runConformanceModes runs scenarios of suite in each of modes at once, each
// against a conformance server (the binary server) of its own; a mode through
// the aggregator has it in front of a tap of that server, configured by
// config of the tap's URL. It returns each mode's results and aggregator (nil
// for a direct mode), which outlives the run: the caller may read its log.
func runConformanceModes(t *testing.T, suite *conformanceSuite, scenarios []string, server string, modes []conformanceMode,
	config func(url string, mode conformanceMode) string) ([]map[string]scenarioResult, []*aggregator) {
	t.Helper()
	results := make([]map[string]scenarioResult, len(modes))
	aggregators := make([]*aggregator, len(modes))
	t.Run("modes", func(t *testing.T) {
		for i, mode := range modes {
			t.Run(mode.name, func(t *testing.T) {
				t.Parallel()
				url := startConformanceServer(t, server)
				var tap *upstreamTap
				if mode.through {
					tap = startUpstreamTap(t, url)
					a := serveConfig(t, httpTransport, config(tap.url, mode))
					a.waitLoaded()
					aggregators[i], url = a, a.url
				}
				start := time.Now()
				results[i] = runConformance(t, suite, scenarios, url, tap)
				t.Logf("%s: %d scenarios in %s", mode.name, len(results[i]), time.Since(start).Round(time.Millisecond))
			})
		}
	})
	return results, aggregators
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
// times. Those scenarios retry one after another, as the suite runs them, so that
// a shared upstream serves one of their calls at a time as it does directly, and
// the tap's counts during a run are that run's.
//
// With a tap (through the aggregator), each retry compares what the client got
// with what the upstream sent on the call's own stream during the run: fewer is
// the aggregator's loss and ends the retries as a failure. What the upstream put
// on its GET stream instead is not the call's, by the transport's rules, and may
// come after the response; the aggregator delivers it as it can.
func runConformance(t *testing.T, suite *conformanceSuite, scenarios []string, url string, tap *upstreamTap) map[string]scenarioResult {
	t.Helper()
	all := suite.runAll(t, url)
	results := make([]scenarioResult, len(scenarios))
	for i, name := range scenarios {
		r, ok := all[name]
		if !ok {
			r = scenarioResult{attempts: 1, problems: []string{"the suite wrote no result"}}
		}
		results[i] = r
		method := flakyNotification(name)
		if method == "" || !r.lostSome {
			continue
		}
		for r.lostSome && r.attempts < flakyAttempts {
			var before tapCount
			if tap != nil {
				before = tap.count(method)
			}
			again := suite.runOne(t, url, name)
			again.attempts = r.attempts + 1
			if tap != nil && again.lostSome {
				// The upstream wrote each notification on the call's
				// stream before the response, so by the time the client
				// judged, the tap had counted them.
				sent := tap.count(method).minus(before)
				if again.delivered < sent.onPOST {
					again.lostSome = false
					again.problems = append(again.problems, fmt.Sprintf(
						"the upstream sent %d %s on the call's stream during the run (and %d on its GET stream) and the client received %d",
						sent.onPOST, method, sent.onGET, again.delivered))
				} else {
					again.upstreamLost = true
				}
			}
			r = again
		}
		results[i] = r
	}

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
	case r.upstreamLost:
		return fmt.Sprintf("upstream lost (%d runs)", r.attempts)
	case r.attempts == 1:
		return "FAIL"
	default:
		return fmt.Sprintf("FAIL (%d runs)", r.attempts)
	}
}
