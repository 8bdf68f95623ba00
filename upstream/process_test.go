package upstream

import (
	"bytes"
	"context"
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
)

func TestCloseKillsAGroupThatIgnoresTerm(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	const stdinGrace, termGrace = 100 * time.Millisecond, 200 * time.Millisecond
	inst := startDemo(t, "misbehave ignore-term", Options{Logger: rec.logger(), StdinGrace: stdinGrace, TermGrace: termGrace})
	pid := inst.PID()

	// The server reports itself and its grandchild on stderr, which the
	// instance logs line by line.
	line := rec.waitFor(t, "child ")
	var self, child int
	_, err := fmt.Sscanf(line[strings.Index(line, "line=")+len("line="):], "pid %d child %d", &self, &child)
	require.NoError(t, err, "stderr line %q", line)
	require.Equal(t, pid, self)
	assert.Contains(t, childrenOf(pid), child, "/proc agrees the grandchild is the server's child")
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	require.True(t, processExists(child))

	began := time.Now()
	require.NoError(t, inst.Close())
	took := time.Since(began)

	assert.GreaterOrEqual(t, took, stdinGrace+termGrace, "neither stdin EOF nor SIGTERM can stop it: only SIGKILL after both graces")
	assert.Less(t, took, stdinGrace+termGrace+3*time.Second, "Close escalates as soon as each grace ends")
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the server is gone and reaped when Close returns")
	assert.False(t, processExists(child), "the grandchild is gone when Close returns (state %q)", procState(child))
	requireGone(t, child)

	select {
	case <-inst.Done():
	default:
		t.Fatal("Done is not closed after Close")
	}
	require.ErrorIs(t, inst.Err(), inst.Err(), "Err is stable")
	_, err = inst.CallTool(context.Background(), Call{Name: "ping_tool"})
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, inst.Close(), "Close is idempotent")
}

func TestCloseOfAWellBehavedServerIsQuick(t *testing.T) {
	t.Parallel()
	// The default graces are seconds long; a server that exits on stdin EOF
	// must not wait for them.
	inst := startDemo(t, "tools", Options{})
	pid := inst.PID()
	began := time.Now()
	require.NoError(t, inst.Close())
	assert.Less(t, time.Since(began), defaultStdinGrace, "a server that exits on EOF is not made to wait for the grace period")
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	require.Error(t, inst.Err(), "Err says why the instance is gone")
}

func TestUpstreamsRunInTheirOwnProcessGroup(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	pgid, err := syscall.Getpgid(inst.PID())
	require.NoError(t, err)
	assert.Equal(t, inst.PID(), pgid, "the server leads its own group")
	assert.NotEqual(t, syscall.Getpgrp(), pgid)
}

// procState is the one-letter state of pid in /proc, or "" if there is none.
func procState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return string(stat[i+2])
	}
	return ""
}

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
	assert.True(t, processExists(untracked.Process.Pid))
}

func TestReaperProcessKillsWhatTheAggregatorLeft(t *testing.T) {
	t.Parallel()
	reaper, err := StartReaper(nil, os.Args[0], reaperArg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reaper.Close() })
	require.True(t, processExists(reaper.PID()))

	// A group registered by hand, and an instance that registers its own.
	cmd, exited := sleepInGroup(t)
	reaper.Track(cmd.Process.Pid)
	inst := startDemo(t, "tools", Options{Supervisor: &Supervisor{log: slog.Default(), id: newRunID(), reaper: reaper}})

	// Closing the pipe is what the kernel does when the aggregator dies
	// however it dies.
	require.NoError(t, reaper.Close())
	requireKilled(t, exited)
	select {
	case <-inst.Done():
	case <-time.After(waitTimeout):
		t.Fatal("the instance's process group outlived the reaper's pipe")
	}
	requireReaped(t, inst.PID())
	requireReaped(t, reaper.PID())

	require.NoError(t, reaper.Close(), "Close is idempotent")
	reaper.Track(1) // no-ops after Close
	var nilReaper *Reaper
	nilReaper.Track(1)
	assert.NoError(t, nilReaper.Close())
}

func TestStartReaperFailure(t *testing.T) {
	t.Parallel()
	_, err := StartReaper(nil, "/nonexistent/reaper")
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "no such file"), "err: %v", err)
	assert.Contains(t, err.Error(), "reaper")
}
