package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// RunFromEnv lets a test binary stand in for an upstream server: when the
// environment variable env names a demo server and its arguments ("tools",
// "misbehave crash-after 1"), it serves that server on stdio and returns
// its exit code with ran set. Otherwise it returns at once.
func RunFromEnv(env string) (code int, ran bool) {
	spec := strings.Fields(os.Getenv(env))
	if len(spec) == 0 {
		return 0, false
	}
	if err := Run(context.Background(), spec[0], spec[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2, true
	}
	return 0, true
}

// QuietRaceExit makes race-enabled child processes exit at once: the race
// detector otherwise pauses a second at every exit. Upstreams get only a safe
// base of the host environment, so the aggregator is also asked to pass
// GORACE on (MCP_AGGREGATOR_INHERIT_ENV, see upstream.InheritEnvVar).
func QuietRaceExit() {
	if opts := os.Getenv("GORACE"); !strings.Contains(opts, "atexit_sleep_ms") {
		_ = os.Setenv("GORACE", strings.TrimSpace(opts+" atexit_sleep_ms=0"))
	}
	const inherit = "MCP_AGGREGATOR_INHERIT_ENV"
	if list := os.Getenv(inherit); !strings.Contains(list, "GORACE") {
		_ = os.Setenv(inherit, strings.Trim(list+",GORACE", ","))
	}
}
