package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

func TestCrashFailsPendingCallsAtOnce(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "misbehave crash-after 1", Options{})
	pid := inst.PID()

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	began := time.Now()
	_, err := inst.CallTool(ctx, Call{Name: "ping_tool", Arguments: json.RawMessage(`{}`)})
	require.Error(t, err)
	assert.Less(t, time.Since(began), 5*time.Second, "the pending call must fail when the process dies, not at its deadline")
	assert.NoError(t, ctx.Err())
	require.ErrorIs(t, err, ErrClosed)
	assert.Contains(t, err.Error(), `"misbehave"`, "the error names the server")
	assert.Contains(t, err.Error(), "exit", "the error says the server exited")
	// What a running server wrote to stderr stays in the log: it may be
	// about any client's calls, and this error goes to a client.
	assert.NotContains(t, err.Error(), "last words")
	assert.NotContains(t, err.Error(), "crashing on")

	select {
	case <-inst.Done():
	case <-time.After(waitTimeout):
		t.Fatal("Done did not close after the upstream died")
	}
	require.Error(t, inst.Err())
	assert.Contains(t, inst.Err().Error(), `"misbehave"`)

	// Later calls fail at once too, and the process is reaped.
	_, err = inst.CallTool(ctx, Call{Name: "ping_tool"})
	require.ErrorIs(t, err, ErrClosed)
	testproc.RequireReaped(t, pid)
	assert.NoError(t, inst.Close(), "closing a dead instance is fine")
}

func TestBadOutputIsSurvived(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec  string
		calls int
		text  string
		logs  string // a warning the instance logs about the bad output
	}{
		{"misbehave noise", 3, "pong", "not JSON-RPC"},
		{"misbehave unknown-id", 3, "pong", "never sent"},
		{"misbehave huge-line", 1, pattern(8 << 20), ""},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			t.Parallel()
			rec := newLogRecorder()
			inst := startDemo(t, tc.spec, Options{Logger: rec.Logger()})
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			for range tc.calls {
				raw, err := inst.CallTool(ctx, Call{Name: "ping_tool", Arguments: json.RawMessage(`{}`)})
				require.NoError(t, err)
				var res struct {
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				}
				require.NoError(t, json.Unmarshal(raw, &res))
				require.Len(t, res.Content, 1)
				assert.Equal(t, "text", res.Content[0].Type)
				require.Equal(t, len(tc.text), len(res.Content[0].Text))
				require.True(t, tc.text == res.Content[0].Text, "the text arrived altered")
			}
			if tc.logs != "" {
				rec.WaitFor(t, tc.logs)
			}
			require.NoError(t, inst.Ping(ctx))
		})
	}
}

// pattern is the demo's deterministic filler text ("0123456789abcdef" repeated).
func pattern(n int) string {
	return strings.Repeat("0123456789abcdef", n/16+1)[:n]
}

// trackedPGIDs is what a Supervisor tells its reaper, read by the test:
// every process group an instance registers shows up as "+PGID", and
// "-PGID" once it is gone. The reaper is a stand-in (reaperTeeArg) that
// passes its stdin on to a named pipe the test reads, and kills nothing.
type trackedPGIDs struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func newTrackedPGIDs(t *testing.T) (*supervise.Supervisor, *trackedPGIDs) {
	tr := &trackedPGIDs{changed: make(chan struct{})}
	fifo := filepath.Join(t.TempDir(), "reaper")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	go func() {
		r, err := os.Open(fifo) // blocks until the stand-in reaper opens it
		if err != nil {
			return
		}
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			tr.mu.Lock()
			tr.lines = append(tr.lines, sc.Text())
			close(tr.changed)
			tr.changed = make(chan struct{})
			tr.mu.Unlock()
		}
	}()
	sup := supervise.New(supervise.Options{Logger: slog.Default(), Reaper: []string{os.Args[0], reaperTeeArg, fifo}, NoCgroups: true})
	t.Cleanup(func() { _ = sup.Close() })
	return sup, tr
}

// wait returns the pgid of the first line starting with op.
func (tr *trackedPGIDs) wait(t *testing.T, op byte) int {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		tr.mu.Lock()
		changed := tr.changed
		for _, l := range tr.lines {
			if len(l) > 1 && l[0] == op {
				tr.mu.Unlock()
				pgid, err := strconv.Atoi(l[1:])
				require.NoError(t, err, "reaper line %q", l)
				return pgid
			}
		}
		tr.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no reaper line %q within %s", op, waitTimeout)
		}
	}
}

func TestInitializeFailures(t *testing.T) {
	t.Parallel()

	t.Run("hang-init hits connect_timeout and leaves no process", func(t *testing.T) {
		t.Parallel()
		reaper, tracked := newTrackedPGIDs(t)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		began := time.Now()
		inst, err := Start(ctx, demoServer("hanger", "misbehave hang-init"),
			Options{Logger: newLogRecorder().Logger(), Supervisor: reaper, StdinGrace: 100 * time.Millisecond, TermGrace: 200 * time.Millisecond})
		require.Error(t, err)
		assert.Nil(t, inst)
		assert.Contains(t, err.Error(), "connect_timeout")
		assert.Contains(t, err.Error(), `"hanger"`)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(began), 5*time.Second)

		pid := tracked.wait(t, '+')
		testproc.RequireReaped(t, pid)
		assert.Equal(t, pid, tracked.wait(t, '-'), "the group is unregistered from the reaper once gone")
	})

	t.Run("exit-init fails at once", func(t *testing.T) {
		t.Parallel()
		reaper, tracked := newTrackedPGIDs(t)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := Start(ctx, demoServer("quitter", "misbehave exit-init"), Options{Logger: newLogRecorder().Logger(), Supervisor: reaper})
		require.Error(t, err)
		// At once: on the server's exit, not at the deadline. How long that
		// takes is the machine's (a loaded one starts a process slowly).
		assert.NoError(t, ctx.Err(), "it failed before its deadline")
		assert.Contains(t, err.Error(), `"quitter"`)
		assert.Contains(t, err.Error(), "initialize")
		assert.Contains(t, err.Error(), "exit status 3")
		assert.Contains(t, err.Error(), `its last words on stderr: "exiting during initialize"`, "the error says why, without the log")
		testproc.RequireReaped(t, tracked.wait(t, '+'))
	})

	t.Run("a command that does not exist", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		srv := &config.Server{ID: "ghost", Transport: config.TransportStdio, Command: "/nonexistent/mcp-server-" + strconv.Itoa(time.Now().Nanosecond())}
		_, err := Start(ctx, srv, Options{Logger: newLogRecorder().Logger()})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `"ghost"`)
		assert.Contains(t, err.Error(), srv.Command)
	})

	t.Run("an unsupported transport", func(t *testing.T) {
		t.Parallel()
		_, err := Start(context.Background(), &config.Server{ID: "odd", Transport: "carrier-pigeon"}, Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "carrier-pigeon")
	})

	t.Run("a command that is not an MCP server", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		// true exits at once without reading: initialize fails promptly.
		_, err := Start(ctx, &config.Server{ID: "truthy", Transport: config.TransportStdio, Command: "true"}, Options{Logger: newLogRecorder().Logger()})
		require.Error(t, err)
		assert.NoError(t, ctx.Err())
		assert.Contains(t, err.Error(), `"truthy"`)
	})
}

func TestExplainOnlyRewritesDeadlines(t *testing.T) {
	inst := &Instance{server: "x"}
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	err := inst.explain(expired, context.DeadlineExceeded)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "connect_timeout")

	other := fmt.Errorf("boom")
	assert.Same(t, other, inst.explain(expired, other))
	assert.Equal(t, context.DeadlineExceeded, inst.explain(context.Background(), context.DeadlineExceeded),
		"a deadline that is not the caller's is passed through")
}

// TestLeaderExitEndsTheServerWhileAChildHoldsStdout: a server started through a
// wrapper that leaves a child holding its stdout (here sh, which backgrounds a sleep
// and then execs the server) is gone when the server process dies: the pending call
// fails at once saying it exited, not at its deadline, and the child is stopped with
// the rest of the group.
func TestLeaderExitEndsTheServerWhileAChildHoldsStdout(t *testing.T) {
	t.Parallel()
	srv := demoServer("wrapped", "tools")
	srv.Command, srv.Args = "/bin/sh", []string{"-c", `sleep 100000 & exec "$0"`, os.Args[0]}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	inst, err := Start(ctx, srv, Options{Logger: newLogRecorder().Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	pid := inst.PID()
	child := testproc.ChildrenOf(pid)
	require.Len(t, child, 1, "the wrapper's background child runs beside the server")

	called := make(chan error, 1)
	running := make(chan struct{}, 1)
	began := time.Now()
	go func() {
		_, err := inst.CallTool(ctx, Call{Name: "slow", Arguments: json.RawMessage(`{"seconds":60,"steps":600}`),
			ProgressToken: json.RawMessage(`1`), OnProgress: func(json.RawMessage) {
				select {
				case running <- struct{}{}:
				default:
				}
			}})
		called <- err
	}()
	select {
	case <-running: // the server is working on the call
	case <-time.After(waitTimeout):
		t.Fatal("no progress from the slow call")
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	select {
	case err = <-called:
	case <-time.After(waitTimeout):
		t.Fatal("the call is still pending after its server died")
	}
	require.ErrorIs(t, err, ErrClosed)
	assert.Contains(t, err.Error(), `"wrapped" exited`, "the error says the server exited")
	assert.Less(t, time.Since(began), 10*time.Second, "the call fails when the server dies, not at its deadline")
	testproc.RequireReaped(t, pid)
	testproc.RequireReaped(t, child[0])
}
