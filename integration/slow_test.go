package integration

import (
	"os"
	"testing"
)

// slowVar is the one switch for the suites that take minutes and need more than
// Go and Node.js 20 (the official MCP conformance suite; the status page in headless chromium). .ci/run sets it;
// a plain "go test ./..." skips them.
const slowVar = "MCP_AGGREGATOR_SLOW"

// slowSwitchedOn reports whether the slow suites are switched on; then a test's missing
// dependency (Node.js, the pinned packages) is a failure, not a reason to skip.
func slowSwitchedOn() bool { return os.Getenv(slowVar) == "1" }

// requireSlow skips t unless the slow suites are switched on.
func requireSlow(t *testing.T) {
	t.Helper()
	if !slowSwitchedOn() {
		t.Skipf("slow suite: set %s=1 to run it (.ci/run does; see docs/testing.md)", slowVar)
	}
}
