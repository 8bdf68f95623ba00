package upstream

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

// demoEnv names the demo server a child copy of this test binary serves
// ("tools", "misbehave crash-after 1", ...).
const demoEnv = testproc.DemoEnv

// reaperArg makes a child copy of this test binary run the reaper
// (supervise.RunReaper).
const reaperArg = "upstream-reaper"

// reaperTeeArg makes a child copy of this test binary a stand-in reaper:
// "upstream-reaper-tee FIFO" copies what it is told to FIFO, and kills
// nothing.
const reaperTeeArg = "upstream-reaper-tee"

// TestMain lets this test binary stand in for the upstream servers: started
// with MCPAGG_DEMO_SERVER set it serves that demo server on its stdio, so the
// tests below talk to real processes. "demo-server NAME ARGS" is accepted
// too, because that is how the ignore-term server starts its grandchild.
func TestMain(m *testing.M) {
	testproc.Main(m, testproc.DemoServer(),
		testproc.Role{Arg: reaperArg, Run: func([]string) int {
			supervise.RunReaper(os.Stdin)
			return 0
		}},
		testproc.Role{Arg: reaperTeeArg, Run: teeReaper})
}

// teeReaper copies its stdin to the FIFO args names.
func teeReaper(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: "+reaperTeeArg+" FIFO")
		return 2
	}
	out, err := os.OpenFile(args[0], os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, _ = io.Copy(out, os.Stdin)
	_ = out.Close()
	return 0
}

// waitTimeout bounds every wait; it is reached only when something is broken.
const waitTimeout = testproc.WaitTimeout

// demoServer is a stdio server config that runs this test binary as the
// demo server spec.
func demoServer(id, spec string) *config.Server {
	return &config.Server{
		ID: id, Transport: config.TransportStdio, Command: os.Args[0],
		Env: map[string]string{demoEnv: spec},
	}
}

// startDemo starts a demo server instance and closes it when the test ends.
func startDemo(t *testing.T, spec string, opts Options) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if opts.Logger == nil {
		opts.Logger = newLogRecorder().Logger()
	}
	inst, err := Start(ctx, demoServer(strings.Fields(spec)[0], spec), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

// newLogRecorder returns a recorder of what an instance logs (an upstream's
// stderr above all), to wait on.
func newLogRecorder() *testproc.LogRecorder { return testproc.NewLogRecorder() }
