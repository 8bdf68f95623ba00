//go:build linux

package supervise

import (
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exitWatches counts the goroutines waiting for a leader's exit, and among
// them those that hold a thread blocked in a system call.
func exitWatches() (waiting, inSyscall int) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "(*Process).watchExit") {
			continue
		}
		header, _, _ := strings.Cut(g, "\n")
		switch {
		case strings.Contains(header, "[syscall"):
			waiting++
			inSyscall++
		case strings.Contains(header, "[IO wait"):
			waiting++
		}
	}
	return waiting, inSyscall
}

// TestRunningProcessesHoldNoBlockedThreads: every running instance waits for
// its leader's exit; were each wait a thread blocked in waitid, the
// aggregator would keep as many threads as instances ever ran at once, for
// the rest of its life. The wait is the runtime poller's, and the exit is
// still seen, with its status.
func TestRunningProcessesHoldNoBlockedThreads(t *testing.T) {
	const n = 20
	var procs []*Process
	for range n {
		cmd := exec.Command("sleep", "60")
		p, err := (*Supervisor)(nil).Start("sleeper", cmd)
		require.NoError(t, err)
		procs = append(procs, p)
		t.Cleanup(func() { p.kill(); _ = p.Reap() })
	}
	// Counted once every watch waits.
	var inSyscall int
	require.Eventually(t, func() bool {
		var waiting int
		waiting, inSyscall = exitWatches()
		return waiting >= n
	}, waitTimeout, time.Millisecond, "the exit watches never began to wait")
	assert.Less(t, inSyscall, n/2, "exit watches holding a thread blocked in waitid while %d processes run", n)

	require.NoError(t, syscall.Kill(procs[0].pgid, syscall.SIGKILL))
	select {
	case <-procs[0].exited:
	case <-time.After(waitTimeout):
		t.Fatal("the exit of a killed process was never seen")
	}
	assert.Equal(t, "signal: SIGKILL", procs[0].status)
	assert.NoError(t, syscall.Kill(procs[0].pgid, 0), "the leader is not reaped before reap")
	require.Error(t, procs[0].Reap())
}
