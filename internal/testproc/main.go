package testproc

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
)

// DemoEnv names the demo server and its arguments a child copy of a test
// binary serves on its stdio ("tools", "misbehave crash-after 1").
const DemoEnv = "MCPAGG_DEMO_SERVER"

// WaitTimeout bounds every wait of a test; it is reached only when something
// is broken.
const WaitTimeout = 20 * time.Second

// Role is a part a copy of the test binary plays instead of running the
// tests: started with Arg as its first argument, it runs Run with the
// arguments after Arg and exits with the code Run returns.
type Role struct {
	Arg string
	Run func(args []string) int
}

// DemoServer is the role "demo-server NAME ARGS", the binary's own
// subcommand, for the demo servers that start a copy of their binary (the
// daemon, a grandchild that ignores SIGTERM).
func DemoServer() Role {
	return Role{Arg: "demo-server", Run: func(args []string) int {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "demo-server: name a demo server")
			return 2
		}
		if err := demo.Run(context.Background(), args[0], args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return 0
	}}
}

// Main is the body of TestMain for a package whose tests start copies of
// their own test binary: a copy started with a role's argument plays that
// role, one started with DemoEnv set serves that demo server on its stdio,
// and only the test binary itself runs the tests. It does not return.
func Main(m *testing.M, roles ...Role) {
	if len(os.Args) >= 2 {
		for _, r := range roles {
			if os.Args[1] == r.Arg {
				os.Exit(r.Run(os.Args[2:]))
			}
		}
	}
	if code, ran := demo.RunFromEnv(DemoEnv); ran {
		os.Exit(code)
	}
	demo.QuietRaceExit()
	os.Exit(m.Run())
}
