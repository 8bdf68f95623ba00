//go:build unix

package supervise

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// sleepInGroup starts "sleep 60" as the leader of a new process group.
func sleepInGroup(t *testing.T) (*exec.Cmd, <-chan error) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Started as the upstreams are, so that its exit status stays its
	// Wait's: a subreaper reaps children of other groups it did not start.
	require.NoError(t, spawn(cmd))
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		children.reaped(cmd.Process.Pid)
		exited <- err
	}()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd, exited
}

func requireKilled(t *testing.T, exited <-chan error) {
	t.Helper()
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr)
		status, ok := exitErr.Sys().(syscall.WaitStatus)
		require.True(t, ok)
		require.True(t, status.Signaled(), "exit: %v", err)
		assert.Equal(t, syscall.SIGKILL, status.Signal())
	case <-time.After(waitTimeout):
		t.Fatal("the process group was not killed")
	}
}

// Not parallel: RunReaper ignores SIGINT, SIGTERM, SIGHUP and SIGPIPE for
// the whole process, which must not leak into children of other tests.
func TestRunReaperKillsRegisteredGroupsAtEOF(t *testing.T) {
	t.Cleanup(func() { signal.Reset(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE) })
	tracked, trackedExited := sleepInGroup(t)
	untracked, untrackedExited := sleepInGroup(t)

	r, w := io.Pipe()
	finished := make(chan struct{})
	go func() {
		RunReaper(r)
		close(finished)
	}()
	lines := []string{
		"", "x", "+not-a-number", "+1", "+0", "-424242", // ignored
		fmt.Sprintf("+%d", tracked.Process.Pid),
		fmt.Sprintf("+%d", untracked.Process.Pid),
		fmt.Sprintf("-%d", untracked.Process.Pid),
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())

	select {
	case <-finished:
	case <-time.After(waitTimeout):
		t.Fatal("RunReaper did not return at EOF")
	}
	requireKilled(t, trackedExited)
	select {
	case err := <-untrackedExited:
		t.Fatalf("an unregistered group was killed: %v", err)
	default:
	}
	assert.True(t, testproc.Exists(untracked.Process.Pid))
}

func TestReaperProcessKillsWhatTheAggregatorLeft(t *testing.T) {
	t.Parallel()
	rp, err := startReaper(nil, os.Args[0], reaperArg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rp.Close() })
	require.True(t, testproc.Exists(rp.PID()))

	// A group registered by hand, and a process whose Supervisor registers it.
	cmd, exited := sleepInGroup(t)
	rp.Track(cmd.Process.Pid)
	sup := &Supervisor{log: slog.Default(), id: newRunID(), reaper: rp}
	proc, err := sup.Start("sleeper", exec.Command("sleep", "60"))
	require.NoError(t, err)
	t.Cleanup(func() { proc.Stop(0, 0) })

	// Closing the pipe is what the kernel does when the aggregator dies
	// however it dies.
	require.NoError(t, rp.Close())
	requireKilled(t, exited)
	select {
	case <-proc.Exited():
	case <-time.After(waitTimeout):
		t.Fatal("the started process group outlived the rp's pipe")
	}
	assert.Equal(t, "signal: SIGKILL", proc.ExitStatus())
	proc.Stop(0, 0)
	testproc.RequireReaped(t, proc.PID())
	testproc.RequireReaped(t, rp.PID())

	require.NoError(t, rp.Close(), "Close is idempotent")
	rp.Track(1) // no-ops after Close
	var nilReaper *reaper
	nilReaper.Track(1)
	assert.NoError(t, nilReaper.Close())
}

func TestStartReaperFailure(t *testing.T) {
	t.Parallel()
	_, err := startReaper(nil, "/nonexistent/reaper")
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "no such file"), "err: %v", err)
	assert.Contains(t, err.Error(), "reaper")
}
