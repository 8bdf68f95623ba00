package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sent is what a Send's done received, and how many times it was called.
type sent struct {
	mu    sync.Mutex
	calls int
	raw   json.RawMessage
	err   error
	got   chan struct{} // closed at the first call
}

func newSent() *sent { return &sent{got: make(chan struct{})} }

func (s *sent) done(raw json.RawMessage, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls == 1 {
		s.raw, s.err = raw, err
		close(s.got)
	}
}

// wait returns what done received first, failing the test when it is not
// called in time.
func (s *sent) wait(t *testing.T) (json.RawMessage, error) {
	t.Helper()
	select {
	case <-s.got:
	case <-time.After(waitTimeout):
		t.Fatal("done was not called")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw, s.err
}

func (s *sent) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Send returns without waiting, and each done gets its own call's answer,
// once; an upstream's JSON-RPC error arrives intact.
func TestSendDeliversEachAnswer(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	const calls = 50
	outs := make([]*sent, calls)
	for i := range calls {
		outs[i] = newSent()
		r, err := Call{Name: "echo", Arguments: json.RawMessage(fmt.Sprintf(`{"text":"message %d"}`, i))}.Request()
		require.NoError(t, err)
		inst.Send(ctx, r, outs[i].done)
	}
	for i, out := range outs {
		raw, err := out.wait(t)
		require.NoError(t, err, "call %d", i)
		assert.JSONEq(t, fmt.Sprintf(`{"content":[{"type":"text","text":"message %d"}]}`, i), string(raw), "call %d", i)
	}

	refused := newSent()
	inst.Send(ctx, Request{Method: "no/such/method"}, refused.done)
	_, err := refused.wait(t)
	var rpcErr *RPCError
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, -32601, rpcErr.Code)

	bad := newSent()
	inst.Send(ctx, Request{}, bad.done)
	_, err = bad.wait(t)
	require.ErrorContains(t, err, "needs a method")

	cancel()
	require.NoError(t, inst.Close())
	for i, out := range outs {
		assert.Equal(t, 1, out.count(), "call %d", i)
	}
}

// A Send whose context ends after the request went out gets the context's
// error at once, and the upstream is told the request was given up, as
// with Do; progress comes before it, in order.
func TestSendCancellationReachesUpstream(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	marker := filepath.Join(t.TempDir(), "cancelled")
	args, _ := json.Marshal(map[string]any{"seconds": 30, "steps": 300, "marker": marker})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	progress := newProgressLog()
	r, err := Call{Name: "slow", Arguments: args, ProgressToken: json.RawMessage(`"slow-1"`), OnProgress: progress.add}.Request()
	require.NoError(t, err)
	out := newSent()
	inst.Send(ctx, r, out.done)
	select {
	case <-progress.first:
	case <-time.After(waitTimeout):
		t.Fatal("no progress from the slow tool")
	}
	cancel()
	raw, err := out.wait(t)
	assert.Nil(t, raw)
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && string(b) == "cancelled"
	}, waitTimeout, 10*time.Millisecond, "the upstream was never told the call was cancelled")

	// A context that ended before the call is not sent at all.
	early := newSent()
	inst.Send(ctx, r, early.done)
	_, err = early.wait(t)
	require.ErrorIs(t, err, context.Canceled)

	// The instance still serves calls.
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel2()
	again := newSent()
	inst.Send(ctx2, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"text":"still here"}}`)}, again.done)
	_, err = again.wait(t)
	require.NoError(t, err)
	assert.Equal(t, 1, out.count())
}

// A Send's deadline is its context's, as Do's is.
func TestSendTimeoutIsTheContextsError(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out := newSent()
	inst.Send(ctx, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"slow","arguments":{"seconds":30}}`)}, out.done)
	_, err := out.wait(t)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, ErrClosed)
}

// Closing the instance fails the Sends in flight at once, and later Sends
// without writing anything.
func TestSendFailsWhenTheInstanceCloses(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "misbehave slow-relist", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	out := newSent()
	inst.Send(ctx, Request{Method: "tools/list"}, out.done) // the server answers only its first
	require.NoError(t, inst.Close())
	_, err := out.wait(t)
	require.ErrorIs(t, err, ErrClosed)

	after := newSent()
	inst.Send(ctx, Request{Method: "ping"}, after.done)
	_, err = after.wait(t)
	require.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, 1, out.count())
}

// A result that is not an object fails a Send as it fails a Do.
func TestSendChecksTheResult(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "misbehave null-result", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	out := newSent()
	inst.Send(ctx, Request{Method: "tools/call", Params: json.RawMessage(`{"name":"ping_tool"}`)}, out.done)
	_, err := out.wait(t)
	require.ErrorContains(t, err, "not a JSON object")
}
