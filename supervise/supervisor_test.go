//go:build linux

package supervise

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// supervisionPaths runs test once per way of tracking processes this
// machine offers: cgroups where cgroup v2 is writable, and the subreaper
// (with tags) always. Each run logs which path it took.
func supervisionPaths(t *testing.T, test func(t *testing.T, sup *Supervisor, rec *testproc.LogRecorder)) {
	for _, noCgroups := range []bool{false, true} {
		name := "auto"
		if noCgroups {
			name = "subreaper"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := testproc.NewLogRecorder()
			sup := New(Options{Logger: rec.Logger(), Reaper: []string{os.Args[0], reaperArg}, NoCgroups: noCgroups})
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

// Short graces for the shutdown sequence of a SIGTERM-ignoring tree.
const quickStdinGrace, quickTermGrace = 100 * time.Millisecond, 300 * time.Millisecond

// daemonServer is a started demo daemon server: the server process, its
// stdin (closing it starts the shutdown sequence), and the daemon it
// forked, which left the server's process group and session.
type daemonServer struct {
	proc   *Process
	stdin  io.WriteCloser
	daemon int
}

// stop runs the MCP shutdown sequence: close stdin, then Stop.
func (d *daemonServer) stop() {
	_ = d.stdin.Close()
	d.proc.Stop(quickStdinGrace, quickTermGrace)
}

// startDaemon starts the demo daemon server under sup and waits for the
// pid of its daemon, which it reports on stderr.
func startDaemon(t *testing.T, sup *Supervisor) *daemonServer {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), demoEnv+"=daemon")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	proc, err := sup.Start("daemon", cmd)
	require.NoError(t, err)
	d := &daemonServer{proc: proc, stdin: stdin}
	t.Cleanup(d.stop)
	pids := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "daemon pid "); ok {
				if pid, err := strconv.Atoi(v); err == nil {
					pids <- pid
				}
			}
		}
	}()
	select {
	case d.daemon = <-pids:
	case <-time.After(waitTimeout):
		t.Fatal("the daemon server never reported its daemon")
	}
	require.True(t, testproc.Exists(d.daemon), "the daemon %d runs", d.daemon)
	t.Cleanup(func() { _ = syscall.Kill(d.daemon, syscall.SIGKILL) })
	return d
}

func TestStopKillsADaemonThatLeftTheGroup(t *testing.T) {
	t.Parallel()
	supervisionPaths(t, func(t *testing.T, sup *Supervisor, rec *testproc.LogRecorder) {
		d := startDaemon(t, sup)
		pgid, err := syscall.Getpgid(d.daemon)
		require.NoError(t, err)
		require.NotEqual(t, d.proc.PID(), pgid, "the daemon left the server's process group")

		cgroup, err := os.ReadFile("/proc/" + strconv.Itoa(d.daemon) + "/cgroup")
		require.NoError(t, err)
		if sup.Mode() == ModeCgroup {
			assert.Contains(t, string(cgroup), "/"+cgroupPrefix+sup.id+"/", "the daemon is in the instance's cgroup")
		}

		u := d.proc.Usage()
		assert.GreaterOrEqual(t, u.Processes, 2, "the server and its daemon")
		assert.Greater(t, u.RSS, int64(1<<20), "they hold at least a MiB")

		d.stop()
		assert.False(t, testproc.Exists(d.daemon), "the daemon is gone when Stop returns")
		// The daemon was re-parented to us, the subreaper: it is ours to reap.
		testproc.RequireReaped(t, d.daemon)
		assert.Equal(t, Usage{}, d.proc.Usage(), "nothing of a stopped process is left")
	})
}

func TestReaperKillsEscapedDaemonsWhenTheAggregatorDies(t *testing.T) {
	t.Parallel()
	supervisionPaths(t, func(t *testing.T, sup *Supervisor, rec *testproc.LogRecorder) {
		d := startDaemon(t, sup)
		// However the aggregator dies, the kernel closes the reaper's pipe;
		// this does the same while the test lives on.
		require.NoError(t, sup.reaper.Close())
		testproc.RequireGone(t, d.daemon)
		select {
		case <-d.proc.Exited():
		case <-time.After(waitTimeout):
			t.Fatal("the instance's group outlived the reaper's pipe")
		}
	})
}

func TestADeadReaperIsRestartedAndToldEverything(t *testing.T) {
	t.Parallel()
	supervisionPaths(t, func(t *testing.T, sup *Supervisor, rec *testproc.LogRecorder) {
		d := startDaemon(t, sup)
		first := sup.reaperPID()
		require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
		rec.WaitFor(t, "WARN the reaper process died; restarting it")
		rec.WaitFor(t, "INFO reaper restarted")
		second := sup.reaperPID()
		assert.NotEqual(t, first, second)
		testproc.RequireReaped(t, first)
		require.True(t, testproc.Exists(second))
		assert.True(t, testproc.Exists(d.daemon), "killing the reaper kills nothing")

		// The new reaper knows the run and the groups: the aggregator's
		// death still takes everything with it.
		require.NoError(t, sup.reaper.Close())
		testproc.RequireGone(t, d.daemon)
		select {
		case <-d.proc.Exited():
		case <-time.After(waitTimeout):
			t.Fatal("the restarted reaper did not kill the instance's group")
		}
	})
}

// TestUsagesReadsTheProcessTableOnce: a status page or a metrics scrape
// measures every instance; each pass over /proc reads the stat file of
// every process on the machine, so measuring them all costs one pass, not
// one per process. The figures are those Usage gives each process.
func TestUsagesReadsTheProcessTableOnce(t *testing.T) {
	sup := New(Options{Logger: testproc.NewLogRecorder().Logger(), Reaper: []string{os.Args[0], reaperArg}})
	t.Cleanup(func() { _ = sup.Close() })
	const n = 6
	procs := make([]*Process, 0, n+1)
	for range n {
		procs = append(procs, startDaemon(t, sup).proc) // its daemon runs
	}
	procs = append(procs, nil)
	before := procTableReads.Load()
	got := Usages(procs)
	// A pass made meanwhile by the reaping of an unrelated child is
	// tolerated; one pass per process is not.
	assert.LessOrEqual(t, procTableReads.Load()-before, int64(2), "passes over /proc to measure %d processes", n)
	require.Len(t, got, n+1)
	for i, p := range procs[:n] {
		want := p.Usage()
		assert.Equal(t, want.Processes, got[i].Processes, "process %d: the server and its daemon", i)
		assert.GreaterOrEqual(t, got[i].Processes, 2, "process %d: the server and its daemon", i)
		assert.Greater(t, got[i].RSS, int64(1<<20), "process %d holds at least a MiB", i)
	}
	assert.Equal(t, Usage{}, got[n], "nil measures zero")
}

func TestAReaperThatCannotBeRestartedIsAnErrorNotAnOutage(t *testing.T) {
	t.Parallel()
	// A name of the reaper's binary that disappears once it runs, as after
	// an upgrade that removed the old binary.
	exe := filepath.Join(t.TempDir(), "reaper")
	require.NoError(t, os.Symlink(os.Args[0], exe))
	rec := testproc.NewLogRecorder()
	r, err := startReaper(rec.Logger(), exe, reaperArg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.NoError(t, os.Remove(exe))

	require.NoError(t, syscall.Kill(r.PID(), syscall.SIGKILL))
	line := rec.WaitFor(t, "ERROR cannot restart the reaper")
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
