//go:build unix

package demo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// demoProcess starts this test binary as "demo-server args..." (see TestMain).
func demoProcess(t *testing.T, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"demo-server"}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, stdin, bufio.NewReader(stdout), stderr
}

func TestProcessExitInit(t *testing.T) {
	cmd, stdin, _, stderr := demoProcess(t, "misbehave", "exit-init")
	_, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`+"\n")
	require.NoError(t, err)
	errText, err := io.ReadAll(stderr)
	require.NoError(t, err)
	err = cmd.Wait()
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "wait: %v", err)
	assert.Equal(t, 3, exitErr.ExitCode())
	assert.Equal(t, "exiting during initialize\n", string(errText))
}

func TestProcessCrashAfter(t *testing.T) {
	cmd, stdin, stdout, _ := demoProcess(t, "misbehave", "crash-after", "1")
	_, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping_tool"}}`+"\n")
	require.NoError(t, err)
	rest, err := io.ReadAll(stdout)
	require.NoError(t, err)
	assert.Empty(t, rest)
	var exitErr *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &exitErr)
	assert.Equal(t, 1, exitErr.ExitCode())
}

func TestProcessIgnoreTerm(t *testing.T) {
	cmd, stdin, stdout, stderr := demoProcess(t, "misbehave", "ignore-term")
	var self, child int
	_, err := fmt.Fscanf(bufio.NewReader(stderr), "pid %d child %d\n", &self, &child)
	require.NoError(t, err)
	require.Equal(t, cmd.Process.Pid, self)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })

	require.NoError(t, syscall.Kill(self, syscall.SIGTERM))
	require.NoError(t, syscall.Kill(self, syscall.SIGINT))
	require.NoError(t, syscall.Kill(child, syscall.SIGTERM))

	// Still serving after the signals.
	_, err = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
	require.NoError(t, err)
	line, err := stdout.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, strings.TrimSpace(line))
	assert.NoError(t, syscall.Kill(child, 0), "grandchild died")

	// Still running after stdin closes: the process has not exited, so
	// killing it succeeds and reports the signal.
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Process.Kill())
	var exitErr *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &exitErr)
	status, ok := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	assert.True(t, status.Signaled())
	assert.Equal(t, syscall.SIGKILL, status.Signal())
}
