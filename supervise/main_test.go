//go:build unix

package supervise

import (
	"os"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// demoEnv names the demo server a child copy of this test binary serves
// ("daemon", "tools", ...).
const demoEnv = testproc.DemoEnv

// reaperArg makes a child copy of this test binary run RunReaper.
const reaperArg = "supervise-reaper"

// waitTimeout bounds every wait; it is reached only when something is broken.
const waitTimeout = testproc.WaitTimeout

// TestMain lets this test binary stand in for the processes a Supervisor
// starts: the reaper, and the demo servers, so that the tests below
// supervise real process trees. "demo-server NAME ARGS" is accepted too,
// because that is how the daemon server starts its daemon.
func TestMain(m *testing.M) {
	testproc.Main(m, testproc.DemoServer(), testproc.Role{Arg: reaperArg, Run: func([]string) int {
		RunReaper(os.Stdin)
		return 0
	}})
}
