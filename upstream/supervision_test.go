//go:build linux

package upstream

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

// supervisionPaths runs test once per way of tracking processes this
// machine offers: cgroups where cgroup v2 is writable, and the subreaper
// (with tags) always. Each run logs which path it took.
func supervisionPaths(t *testing.T, test func(t *testing.T, sup *supervise.Supervisor, rec *testproc.LogRecorder)) {
	for _, noCgroups := range []bool{false, true} {
		name := "auto"
		if noCgroups {
			name = "subreaper"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := newLogRecorder()
			sup := supervise.New(supervise.Options{Logger: rec.Logger(), Reaper: []string{os.Args[0], reaperArg}, NoCgroups: noCgroups})
			t.Cleanup(func() { _ = sup.Close() })
			t.Logf("process supervision path: %s", sup.Mode())
			if noCgroups {
				require.Equal(t, supervise.ModeSubreaper, sup.Mode())
			} else {
				require.Contains(t, []string{supervise.ModeCgroup, supervise.ModeSubreaper}, sup.Mode())
			}
			test(t, sup, rec)
		})
	}
}

// daemonPIDs asks a daemon demo instance for its own pid and its daemon's.
func daemonPIDs(t *testing.T, inst *Instance) (server, daemon int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	raw, err := inst.CallTool(ctx, Call{Name: "daemon_pid", Arguments: json.RawMessage(`{}`)})
	require.NoError(t, err)
	var res struct {
		Structured struct{ Server, Daemon int } `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	require.Equal(t, inst.PID(), res.Structured.Server)
	daemon = res.Structured.Daemon
	require.True(t, testproc.Exists(daemon), "the daemon %d runs", daemon)
	t.Cleanup(func() { _ = syscall.Kill(daemon, syscall.SIGKILL) })
	return res.Structured.Server, daemon
}

// quickGraces keep the shutdown sequence of a SIGTERM-ignoring tree short.
var quickGraces = Options{StdinGrace: 100 * time.Millisecond, TermGrace: 300 * time.Millisecond}

func withSupervisor(sup *supervise.Supervisor, rec *testproc.LogRecorder) Options {
	o := quickGraces
	o.Supervisor, o.Logger = sup, rec.Logger()
	return o
}

func TestCloseKillsADaemonThatLeftTheGroup(t *testing.T) {
	t.Parallel()
	supervisionPaths(t, func(t *testing.T, sup *supervise.Supervisor, rec *testproc.LogRecorder) {
		inst := startDemo(t, "daemon", withSupervisor(sup, rec))
		server, daemon := daemonPIDs(t, inst)
		pgid, err := syscall.Getpgid(daemon)
		require.NoError(t, err)
		require.NotEqual(t, server, pgid, "the daemon left the server's process group")

		cgroup, err := os.ReadFile("/proc/" + strconv.Itoa(daemon) + "/cgroup")
		require.NoError(t, err)
		if sup.Mode() == supervise.ModeCgroup {
			own, err := os.ReadFile("/proc/" + strconv.Itoa(server) + "/cgroup")
			require.NoError(t, err)
			assert.Contains(t, string(own), "/mcp-aggregator-", "the server is in a cgroup of the run")
			assert.Equal(t, string(own), string(cgroup), "the daemon is in the instance's cgroup")
		}

		u := inst.Usage()
		assert.GreaterOrEqual(t, u.Processes, 2, "the server and its daemon")
		assert.Greater(t, u.RSS, int64(1<<20), "they hold at least a MiB")

		require.NoError(t, inst.Close())
		assert.False(t, testproc.Exists(daemon), "the daemon is gone when Close returns")
		// The daemon was re-parented to us, the subreaper: it is ours to reap.
		testproc.RequireReaped(t, daemon)
		assert.Equal(t, Usage{}, inst.Usage(), "nothing of a closed instance is left")
	})
}
