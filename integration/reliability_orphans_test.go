package integration

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relStubbornConfig serves one shared upstream that is a shell wrapper around the
// ignore-term demo server, so that its process group holds three processes: the shell,
// the server (which ignores stdin EOF, SIGTERM and SIGINT) and its grandchild sleeper
// (which ignores SIGTERM and SIGINT too). The trailing "exit" keeps the shell from
// replacing itself with the server.
func relStubbornConfig() string {
	script := quoted(binary) + " demo-server misbehave ignore-term; exit $?"
	return `version: 1
servers:
  stubborn:
    truely-stateless: true
    command: sh
    args: ['-c', ` + quoted(script) + `]
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
`
}

// relTree is every process an aggregator started for the stubborn server, plus its reaper.
type relTree map[string]int

// relStubbornTree learns the pids of the shell, the server and the grandchild (from
// the server's stderr line "pid X child Y" in the aggregator's log and from
// mcp_status), checks that they are what they claim to be, and adds the reaper.
func relStubbornTree(t *testing.T, a *aggregator, c *client) relTree {
	t.Helper()
	stderrLine := relUpstreamStderr("stubborn")
	line := relLogLine(t, a, startTimeout, `msg="upstream stderr"`, "server=stubborn", `line="pid `)
	m := ignoreTermLine.FindStringSubmatch(stderrLine.FindStringSubmatch(line)[1])
	require.NotNil(t, m, "unexpected stderr line %q", line)
	server, _ := strconv.Atoi(m[1])
	grandchild, _ := strconv.Atoi(m[2])

	shell := relStatus(t, c).relSharedPID("stubborn")
	require.NotZero(t, shell, "mcp_status reports no pid for the stubborn server")
	_, serverParent, ok := relProcStat(server)
	require.True(t, ok, "the ignore-term server (pid %d) is not running", server)
	require.Equal(t, shell, serverParent, "the ignore-term server is a child of the shell wrapper")
	_, grandchildParent, ok := relProcStat(grandchild)
	require.True(t, ok, "the sleeper (pid %d) is not running", grandchild)
	require.Equal(t, server, grandchildParent, "the sleeper is the server's child")

	tree := relTree{"shell": shell, "server": server, "grandchild": grandchild, "reaper": relReaperPID(t, a.marker)}
	for name, pid := range tree {
		requireMarked(t, a.marker, pid)
		assert.True(t, relRunning(pid), "%s (pid %d) runs before the aggregator ends", name, pid)
	}
	return tree
}

// relWaitExit waits for the aggregator to exit and returns its exit code.
func relWaitExit(t *testing.T, a *aggregator, why string) int {
	t.Helper()
	select {
	case <-a.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("the aggregator did not exit within %s of %s", stopTimeout, why)
	}
	if a.waitErr == nil {
		return 0
	}
	return a.cmd.ProcessState.ExitCode()
}

// relForgetSession drops the HTTP session of a client whose aggregator is gone, so that
// closing the client at cleanup does not try to DELETE it.
func relForgetSession(c *client) {
	if w, ok := c.wire.(*httpWire); ok {
		w.mu.Lock()
		w.session = ""
		w.mu.Unlock()
	}
}

// TestReliabilityNoOrphans ends the aggregator in every way it can end, with a stubborn
// upstream wrapped in a shell, and checks by pid that the shell, the server, its
// grandchild and the aggregator's reaper are all gone afterwards.
func TestReliabilityNoOrphans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		transport transport
		end       func(t *testing.T, a *aggregator)
		wantCode  int // -1: a crash, any non-zero code
	}{
		{"SIGTERM over HTTP", httpTransport, func(t *testing.T, a *aggregator) {
			require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
		}, 0},
		{"SIGINT over stdio", stdioTransport, func(t *testing.T, a *aggregator) {
			require.NoError(t, a.cmd.Process.Signal(syscall.SIGINT))
		}, 0},
		{"stdin EOF", stdioTransport, func(t *testing.T, a *aggregator) {
			require.NoError(t, a.stdin.Close())
		}, 0},
		// SIGQUIT makes the Go runtime abort at once, without running deferred code,
		// as an unrecovered panic does: only the parent-death signal and the reaper
		// are left to clean up.
		{"runtime abort (SIGQUIT)", httpTransport, func(t *testing.T, a *aggregator) {
			require.NoError(t, a.cmd.Process.Signal(syscall.SIGQUIT))
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := serveConfig(t, tc.transport, relStubbornConfig())
			a.waitLoaded()
			c := a.connect()
			assert.Equal(t, "pong", firstText(t, c.callToolResult("ping_tool", map[string]any{})))
			tree := relStubbornTree(t, a, c)

			tc.end(t, a)
			code := relWaitExit(t, a, tc.name)
			if tc.wantCode < 0 {
				assert.NotZero(t, code, "the aborted aggregator's exit code")
				a.killed = true // no clean exit is expected from stop at cleanup
			} else {
				assert.Equal(t, tc.wantCode, code, "the aggregator's exit code; stderr:\n%s", a.log)
			}
			relForgetSession(c)
			relWaitGone(t, tree, survivorTimeout)
			// stop (at cleanup) also scans the whole marked tree.
		})
	}
}
