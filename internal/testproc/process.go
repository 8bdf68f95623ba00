package testproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Exists reports whether pid is a live process. A zombie counts as gone: it
// runs nothing and only waits for its parent (or init) to reap it.
func Exists(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// RequireGone waits until pid no longer exists (Exists), failing the test
// after WaitTimeout.
func RequireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return !Exists(pid) }, WaitTimeout, 10*time.Millisecond,
		"process %d still exists", pid)
}

// RequireReaped waits until pid is gone and reaped (kill -0 reports ESRCH),
// which is what a direct child of ours must reach, failing the test after
// WaitTimeout.
func RequireReaped(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}, WaitTimeout, 10*time.Millisecond, "process %d was not reaped", pid)
}

// ChildrenOf lists the pids whose parent is ppid, from /proc.
func ChildrenOf(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		var state string
		var parent int
		if _, err := fmt.Sscanf(string(stat[i+2:]), "%s %d", &state, &parent); err == nil && parent == ppid {
			out = append(out, pid)
		}
	}
	return out
}
