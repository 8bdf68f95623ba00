//go:build linux

package upstream

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// supervisionPaths runs test once per way of tracking processes this
// machine offers: cgroups where cgroup v2 is writable, and the subreaper
// (with tags) always. Each run logs which path it took.
func supervisionPaths(t *testing.T, test func(t *testing.T, sup *Supervisor, rec *logRecorder)) {
	for _, noCgroups := range []bool{false, true} {
		name := "auto"
		if noCgroups {
			name = "subreaper"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := newLogRecorder()
			sup := NewSupervisor(SupervisorOptions{Logger: rec.logger(), Reaper: []string{os.Args[0], reaperArg}, NoCgroups: noCgroups})
			t.Cleanup(func() { _ = sup.Close() })
			t.Logf("process supervision path: %s", sup.Mode())
			if noCgroups {
				require.Equal(t, ModeSubreaper, sup.Mode())
			} else {
				require.Contains(t, []string{ModeCgroup, ModeSubreaper}, sup.Mode())
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
	require.True(t, processExists(daemon), "the daemon %d runs", daemon)
	t.Cleanup(func() { _ = syscall.Kill(daemon, syscall.SIGKILL) })
	return res.Structured.Server, daemon
}

// quickGraces keep the shutdown sequence of a SIGTERM-ignoring tree short.
var quickGraces = Options{StdinGrace: 100 * time.Millisecond, TermGrace: 300 * time.Millisecond}

func withSupervisor(sup *Supervisor, rec *logRecorder) Options {
	o := quickGraces
	o.Supervisor, o.Logger = sup, rec.logger()
	return o
}

func TestCloseKillsADaemonThatLeftTheGroup(t *testing.T) {
	t.Parallel()
	supervisionPaths(t, func(t *testing.T, sup *Supervisor, rec *logRecorder) {
		inst := startDemo(t, "daemon", withSupervisor(sup, rec))
		server, daemon := daemonPIDs(t, inst)
		pgid, err := syscall.Getpgid(daemon)
		require.NoError(t, err)
		require.NotEqual(t, server, pgid, "the daemon left the server's process group")

		cgroup, err := os.ReadFile("/proc/" + strconv.Itoa(daemon) + "/cgroup")
		require.NoError(t, err)
		if sup.Mode() == ModeCgroup {
			assert.Contains(t, string(cgroup), "/"+cgroupPrefix+sup.id+"/", "the daemon is in the instance's cgroup")
		}

		u := inst.Usage()
		assert.GreaterOrEqual(t, u.Processes, 2, "the server and its daemon")
		assert.Greater(t, u.RSS, int64(1<<20), "they hold at least a MiB")

		require.NoError(t, inst.Close())
		assert.False(t, processExists(daemon), "the daemon is gone when Close returns")
		// The daemon was re-parented to us, the subreaper: it is ours to reap.
		requireReaped(t, daemon)
		assert.Equal(t, Usage{}, inst.Usage(), "nothing of a closed instance is left")
	})
}

func TestReaperKillsEscapedDaemonsWhenTheAggregatorDies(t *testing.T) {
	t.Parallel()
	supervisionPaths(t, func(t *testing.T, sup *Supervisor, rec *logRecorder) {
		inst := startDemo(t, "daemon", withSupervisor(sup, rec))
		_, daemon := daemonPIDs(t, inst)
		// However the aggregator dies, the kernel closes the reaper's pipe;
		// this does the same while the test lives on.
		require.NoError(t, sup.reaper.Close())
		requireGone(t, daemon)
		select {
		case <-inst.Done():
		case <-time.After(waitTimeout):
			t.Fatal("the instance's group outlived the reaper's pipe")
		}
	})
}

func TestADeadReaperIsRestartedAndToldEverything(t *testing.T) {
	t.Parallel()
	supervisionPaths(t, func(t *testing.T, sup *Supervisor, rec *logRecorder) {
		inst := startDemo(t, "daemon", withSupervisor(sup, rec))
		_, daemon := daemonPIDs(t, inst)
		first := sup.ReaperPID()
		require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
		rec.waitFor(t, "WARN the reaper process died; restarting it")
		rec.waitFor(t, "INFO reaper restarted")
		second := sup.ReaperPID()
		assert.NotEqual(t, first, second)
		requireReaped(t, first)
		require.True(t, processExists(second))
		assert.True(t, processExists(daemon), "killing the reaper kills nothing")

		// The new reaper knows the run and the groups: the aggregator's
		// death still takes everything with it.
		require.NoError(t, sup.reaper.Close())
		requireGone(t, daemon)
		select {
		case <-inst.Done():
		case <-time.After(waitTimeout):
			t.Fatal("the restarted reaper did not kill the instance's group")
		}
	})
}

func TestAReaperThatCannotBeRestartedIsAnErrorNotAnOutage(t *testing.T) {
	t.Parallel()
	// A name of the reaper's binary that disappears once it runs, as after
	// an upgrade that removed the old binary.
	exe := filepath.Join(t.TempDir(), "reaper")
	require.NoError(t, os.Symlink(os.Args[0], exe))
	rec := newLogRecorder()
	r, err := StartReaper(rec.logger(), exe, reaperArg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.NoError(t, os.Remove(exe))

	require.NoError(t, syscall.Kill(r.PID(), syscall.SIGKILL))
	line := rec.waitFor(t, "ERROR cannot restart the reaper")
	assert.Contains(t, line, "still serving")
	done := make(chan struct{})
	go func() {
		r.Track(12345)
		r.Untrack(12345)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("registering a group blocks without a reaper")
	}
	require.NoError(t, r.Close(), "Close ends the retries")
}

func TestTagsNestAggregators(t *testing.T) {
	t.Setenv(tagVar, "outer.1.aa:3")
	env := withTag([]string{"A=1", tagVar + "=stale:9"}, "inner.2.bb:7")
	assert.Equal(t, []string{"A=1", tagVar + "=stale:9,inner.2.bb:7"}, env, "a tag in the server's env is kept")
	env = withTag([]string{"A=1"}, "inner.2.bb:7")
	assert.Equal(t, []string{"A=1", tagVar + "=outer.1.aa:3,inner.2.bb:7"}, env, "the outer aggregator's tag is kept")

	tags := []string{"outer.1.aa:3", "inner.2.bb:7"}
	assert.True(t, hasTag(tags, "inner.2.bb:7"))
	assert.False(t, hasTag(tags, "inner.2.bb:70"))
	assert.True(t, hasRunTag(tags, "outer.1.aa"))
	assert.False(t, hasRunTag(tags, "outer.1.a"))
}

func TestRunIDNamesOneProcess(t *testing.T) {
	t.Parallel()
	pid, start, ok := parseRunID(newRunID())
	require.True(t, ok)
	assert.Equal(t, os.Getpid(), pid)
	assert.True(t, processStarted(pid, start))
	assert.False(t, processStarted(pid, start+1), "another start time is another process")
	for _, bad := range []string{"", "1.2", "x.2.ab", "1.y.ab", "0.2.ab"} {
		_, _, ok := parseRunID(bad)
		assert.False(t, ok, bad)
	}
	assert.Equal(t, "a_b.c-d_", cgroupName("a/b.c-d\n"))
}
