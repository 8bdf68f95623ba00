package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// A stopped upstream reads nothing: once its stdin pipe is full, a write to
// it blocks. These tests stop the process (SIGSTOP) and send a message far
// larger than the pipe holds.

const hungStdinGrace, hungTermGrace = 300 * time.Millisecond, 300 * time.Millisecond

// bigArguments is a 1 MiB echo argument, sixteen times what a pipe holds.
var bigArguments = json.RawMessage(`{"text":"` + strings.Repeat("x", 1<<20) + `"}`)

// startStopped starts the tools demo server and stops it. Whatever the test
// does, the group is killed when it ends.
func startStopped(t *testing.T) (*Instance, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	inst, err := Start(ctx, demoServer("hung", "tools"), Options{Logger: newLogRecorder().Logger(),
		StdinGrace: hungStdinGrace, TermGrace: hungTermGrace})
	require.NoError(t, err)
	pid := inst.PID()
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	return inst, pid
}

type callResult struct {
	raw json.RawMessage
	err error
}

func callAsync(ctx context.Context, inst *Instance, call Call) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		raw, err := inst.CallTool(ctx, call)
		done <- callResult{raw, err}
	}()
	return done
}

// requireCloseWithin closes inst and fails unless Close returns within limit.
func requireCloseWithin(t *testing.T, inst *Instance, limit time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- inst.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(limit):
		t.Fatalf("Close did not return within %s", limit)
	}
	return time.Since(began)
}

func TestHungUpstream(t *testing.T) {
	t.Parallel()
	// Generous: what these tests guard against is a write, a wait for the
	// write slot or a Close that never ends; on a loaded machine the
	// shutdown alone has taken over three times its graces.
	margin := 10 * time.Second
	shutdown := hungStdinGrace + hungTermGrace

	t.Run("a call's deadline bounds its write", func(t *testing.T) {
		t.Parallel()
		inst, pid := startStopped(t)
		const timeout = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		began := time.Now()
		var res callResult
		select {
		case res = <-callAsync(ctx, inst, Call{Name: "echo", Arguments: bigArguments}):
		case <-time.After(timeout + 5*time.Second):
			t.Fatal("the call outlived its deadline: its write is not bounded by it")
		}
		assert.Less(t, time.Since(began), timeout+margin, "the call fails at its deadline")
		require.ErrorIs(t, res.err, context.DeadlineExceeded)
		assert.Contains(t, res.err.Error(), `"hung"`)

		// Part of the message went out, so the stream cannot be framed any
		// more: the connection fails, and so does every later call, at once.
		select {
		case <-inst.Done():
		case <-time.After(waitTimeout):
			t.Fatal("a write cut off mid-message did not fail the connection")
		}
		assert.Contains(t, inst.Err().Error(), "cut off")
		_, err := inst.CallTool(context.Background(), Call{Name: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
		require.ErrorIs(t, err, ErrClosed)

		requireCloseWithin(t, inst, shutdown+margin)
		testproc.RequireReaped(t, pid)
	})

	t.Run("Close ends a write that has no deadline", func(t *testing.T) {
		t.Parallel()
		inst, pid := startStopped(t)
		blocked := callAsync(context.Background(), inst, Call{Name: "echo", Arguments: bigArguments})
		conn := inst.conn.(*stdioConn)
		require.Eventually(t, func() bool { return len(conn.writeSlot) == 1 }, waitTimeout, time.Millisecond,
			"the call never took the write slot")

		// A second caller waits for the slot only as long as its own deadline.
		const timeout = 200 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		began := time.Now()
		select {
		case res := <-callAsync(ctx, inst, Call{Name: "echo", Arguments: json.RawMessage(`{"text":"small"}`)}):
			require.ErrorIs(t, res.err, context.DeadlineExceeded)
		case <-time.After(timeout + 5*time.Second):
			t.Fatal("a caller waiting for the write slot outlived its deadline")
		}
		assert.Less(t, time.Since(began), timeout+margin)

		took := requireCloseWithin(t, inst, shutdown+margin)
		assert.Less(t, took, shutdown+margin)
		select {
		case res := <-blocked:
			require.ErrorIs(t, res.err, ErrClosed, "the blocked call fails once Close closes the pipe")
		case <-time.After(margin):
			t.Fatal("the blocked write outlived Close")
		}
		testproc.RequireReaped(t, pid)
	})
}
