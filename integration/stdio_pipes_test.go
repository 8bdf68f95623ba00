package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStdioPipesPolledAndRestored: the stdio server reads and writes its client's
// pipes through the runtime's poller (in non-blocking mode) while it serves, on one
// processor, and leaves both pipes in blocking mode again when it exits, for
// whoever shares them. The test keeps its own copies of the aggregator's ends, which
// share their mode with the aggregator's.
func TestStdioPipesPolledAndRestored(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  demo:\n    %s\n", demoServer("tools")))
	childIn, toChild, err := os.Pipe()
	require.NoError(t, err)
	fromChild, childOut, err := os.Pipe()
	require.NoError(t, err)
	defer childIn.Close()
	defer childOut.Close()
	defer fromChild.Close()

	cmd := exec.Command(binary, "serve", "--config", config, "--log-level", "debug")
	cmd.Stdin, cmd.Stdout = childIn, childOut // exec.Cmd puts them in blocking mode
	cmd.Env = withoutEnv(os.Environ(), "GOMAXPROCS")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.False(t, nonblockingFD(t, childIn), "the pipe is blocking before the aggregator starts")

	_, err = fmt.Fprintln(toChild, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.NoError(t, err)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(fromChild).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &resp), "the response to initialize: %q", line)
		require.Equal(t, 1, resp.ID)
		require.NotEmpty(t, resp.Result)
	case <-time.After(startTimeout):
		t.Fatalf("no response to initialize; stderr:\n%s", &stderr)
	}
	// The pipes were made non-blocking before the server started reading.
	assert.True(t, nonblockingFD(t, childIn), "stdin is read through the poller while serving")
	assert.True(t, nonblockingFD(t, childOut), "stdout is written through the poller while serving")

	require.NoError(t, toChild.Close())
	select {
	case err := <-exited:
		require.NoError(t, err, "stderr:\n%s", &stderr)
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("the aggregator did not exit within %s of its input closing; stderr:\n%s", stopTimeout, &stderr)
	}
	assert.False(t, nonblockingFD(t, childIn), "stdin is blocking again after the aggregator exits")
	assert.False(t, nonblockingFD(t, childOut), "stdout is blocking again after the aggregator exits")
	assert.Contains(t, stderr.String(), `msg="serving stdio on one processor"`)
}

// nonblockingFD reports whether f's open file is in non-blocking mode, without
// changing it (f.Fd would make it blocking).
func nonblockingFD(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	require.NoError(t, err)
	var flags uintptr
	var errno syscall.Errno
	require.NoError(t, rc.Control(func(fd uintptr) {
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}))
	require.Zero(t, errno, "fcntl F_GETFL")
	return flags&syscall.O_NONBLOCK != 0
}

// withoutEnv is env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
