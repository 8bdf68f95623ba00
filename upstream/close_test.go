package upstream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

func TestCloseKillsAGroupThatIgnoresTerm(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	const stdinGrace, termGrace = 100 * time.Millisecond, 200 * time.Millisecond
	inst := startDemo(t, "misbehave ignore-term", Options{Logger: rec.Logger(), StdinGrace: stdinGrace, TermGrace: termGrace})
	pid := inst.PID()

	// The server reports itself and its grandchild on stderr, which the
	// instance logs line by line.
	line := rec.WaitFor(t, "child ")
	var self, child int
	_, err := fmt.Sscanf(line[strings.Index(line, "line=")+len("line="):], "pid %d child %d", &self, &child)
	require.NoError(t, err, "stderr line %q", line)
	require.Equal(t, pid, self)
	assert.Contains(t, testproc.ChildrenOf(pid), child, "/proc agrees the grandchild is the server's child")
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	require.True(t, testproc.Exists(child))

	began := time.Now()
	require.NoError(t, inst.Close())
	took := time.Since(began)

	assert.GreaterOrEqual(t, took, stdinGrace+termGrace, "neither stdin EOF nor SIGTERM can stop it: only SIGKILL after both graces")
	assert.Less(t, took, stdinGrace+termGrace+3*time.Second, "Close escalates as soon as each grace ends")
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the server is gone and reaped when Close returns")
	assert.False(t, testproc.Exists(child), "the grandchild is gone when Close returns (state %q)", procState(child))
	testproc.RequireGone(t, child)

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
	assert.Less(t, time.Since(began), supervise.DefaultStdinGrace, "a server that exits on EOF is not made to wait for the grace period")
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
