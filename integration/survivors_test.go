package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every process a test starts gets a marker in its environment. The aggregator passes
// the marker on to the upstreams it spawns (MCP_AGGREGATOR_INHERIT_ENV names it), and
// they to theirs, so scanning
// /proc/*/environ for the marker finds the whole tree, even processes that were
// reparented after their parent exited. A process that outlived the aggregator is a
// leak, however it got there.

// markerVar is the environment variable that carries a test's marker.
const markerVar = "MCP_AGGREGATOR_INTEGRATION_RUN"

// survivorTimeout bounds the wait for a stopped tree to disappear: the aggregator's
// close sequence gives each upstream a few seconds of grace before SIGKILL.
const survivorTimeout = 20 * time.Second

var markers atomic.Int64

// newMarker returns a marker no other process tree in this test run carries.
func newMarker() string {
	return fmt.Sprintf("%d-%d", os.Getpid(), markers.Add(1))
}

// markerEnv returns the environment for a process tree marked with marker.
func markerEnv(marker string, extra ...string) []string {
	// Upstreams get only a safe base of the aggregator's environment and what this
	// list names.
	env := append(os.Environ(), markerVar+"="+marker, "MCP_AGGREGATOR_INHERIT_ENV="+markerVar+",GORACE")
	if raceEnabled {
		// A race-enabled binary otherwise sleeps a second before it exits, and every
		// demo upstream is this binary too.
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return append(env, extra...)
}

// proc is one live process.
type proc struct {
	pid     int
	cmdline string
}

func (p proc) String() string { return fmt.Sprintf("pid %d (%s)", p.pid, p.cmdline) }

// markedProcesses lists the live (not zombie) processes whose environment carries marker.
func markedProcesses(t testing.TB, marker string) []proc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err, "reading /proc")
	want := []byte(markerVar + "=" + marker)
	var found []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		marked := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				marked = true
				break
			}
		}
		if !marked || isZombie(dir) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		found = append(found, proc{pid: pid, cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))})
	}
	return found
}

// isZombie reports whether the process behind dir has exited but not been reaped, or is
// gone; either way it no longer runs.
func isZombie(dir string) bool {
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may hold anything.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state == 'Z' || state == 'X'
}

// requireMarked fails the test unless pid is a live process of the tree marked with
// marker; it proves that the tree scan sees the processes a test learned about in
// other ways (the demo pid tool, mcp_status).
func requireMarked(t testing.TB, marker string, pid int) {
	t.Helper()
	for _, p := range markedProcesses(t, marker) {
		if p.pid == pid {
			return
		}
	}
	require.Failf(t, "process not found", "pid %d is not a live process of this test's tree %v", pid, markedProcesses(t, marker))
}

// assertNoSurvivors waits until no process of the tree marked with marker is left. If
// some are still running at the deadline, it reports them and kills them so they do
// not disturb later tests.
func assertNoSurvivors(t testing.TB, marker string) bool {
	t.Helper()
	deadline := time.Now().Add(survivorTimeout)
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()
	for {
		left := markedProcesses(t, marker)
		if len(left) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%d process(es) outlived the aggregator by %s: %v", len(left), survivorTimeout, left)
			for _, p := range left {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
			return false
		}
		<-poll.C
	}
}
