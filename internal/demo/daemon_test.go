//go:build linux

package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// statOf returns the state, ppid, process group and session of pid from
// /proc; ok is false once it is gone.
func statOf(pid int) (state byte, ppid, pgrp, sid int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, 0, false
	}
	f := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	ppid, _ = strconv.Atoi(string(f[1]))
	pgrp, _ = strconv.Atoi(string(f[2]))
	sid, _ = strconv.Atoi(string(f[3]))
	return f[0][0], ppid, pgrp, sid, true
}

func TestDaemonEscapesTheServersGroupAndIgnoresTerm(t *testing.T) {
	cmd, stdin, stdout, stderr := demoProcess(t, "daemon")
	var daemon int
	_, err := fmt.Fscanf(bufio.NewReader(stderr), "daemon pid %d\n", &daemon)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(daemon, syscall.SIGKILL) })

	_, ppid, pgrp, sid, ok := statOf(daemon)
	require.True(t, ok, "the daemon runs")
	serverGroup, err := syscall.Getpgid(cmd.Process.Pid)
	require.NoError(t, err)
	assert.NotEqual(t, serverGroup, pgrp, "the daemon left the server's process group")
	assert.NotEqual(t, cmd.Process.Pid, ppid, "the daemon is no child of the server: its parent exited")
	assert.NotEqual(t, daemon, sid, "the daemon is no session leader, so it cannot get a terminal back")
	serverSession, err := unix.Getsid(cmd.Process.Pid)
	require.NoError(t, err)
	assert.NotEqual(t, serverSession, sid, "the daemon runs in a session of its own")

	// The MCP side reports both pids.
	_, err = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"daemon_pid"}}`+"\n")
	require.NoError(t, err)
	line, err := stdout.ReadString('\n')
	require.NoError(t, err)
	var resp struct {
		Result struct {
			Structured struct{ Server, Daemon int } `json:"structuredContent"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &resp), line)
	assert.Equal(t, cmd.Process.Pid, resp.Result.Structured.Server)
	assert.Equal(t, daemon, resp.Result.Structured.Daemon)

	// The polite signals do nothing to it, and the server's own end neither.
	// An ignored signal is dropped when it is sent, so once SigIgn lists
	// them, kill returning means they were discarded.
	require.Eventually(t, func() bool { return ignores(daemon, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP) },
		waitTimeout, 10*time.Millisecond, "the daemon never came to ignore SIGTERM, SIGINT and SIGHUP")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		require.NoError(t, syscall.Kill(daemon, sig))
	}
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait(), "the server exits on stdin EOF")
	state, _, _, _, ok := statOf(daemon)
	assert.True(t, ok && state != 'Z', "the daemon outlives its server")
}

// ignores reports whether pid ignores every one of sigs (SigIgn in /proc).
func ignores(pid int, sigs ...syscall.Signal) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if hex, ok := bytes.CutPrefix(line, []byte("SigIgn:")); ok {
			mask, err := strconv.ParseUint(string(bytes.TrimSpace(hex)), 16, 64)
			if err != nil {
				return false
			}
			for _, sig := range sigs {
				if mask&(1<<(uint(sig)-1)) == 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}
