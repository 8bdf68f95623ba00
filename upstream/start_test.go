package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// outcomes takes what Started requests complete with.
type outcomes chan callResult

// Complete keeps a copy of raw, which is lent.
func (o outcomes) Complete(raw json.RawMessage, err error) { o <- callResult{bytes.Clone(raw), err} }

func (o outcomes) await(t *testing.T) callResult {
	t.Helper()
	select {
	case r := <-o:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("the started request never completed")
		return callResult{}
	}
}

// A request sent with Start completes with what Do returns for it: a
// result byte for byte, an error of the upstream's intact.
func TestStartCompletesAsDo(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, params := range []string{
		`{"name":"echo","arguments":{"text":"hello"}}`,
		`{"name":"fail","arguments":{"message":"no"}}`,
		`{"name":"no_such_tool","arguments":{}}`,
	} {
		r := Request{Method: "tools/call", Params: json.RawMessage(params)}
		want, wantErr := inst.Do(ctx, r)
		done := make(outcomes, 2)
		require.NotNil(t, inst.Start(ctx, r, done), params)
		got := done.await(t)
		assert.Equal(t, string(want), string(got.raw), params)
		assert.Equal(t, wantErr, got.err, params)
		assert.Empty(t, done, "completed once")
	}
}

// Abort gives a started request up as the end of Do's context does: the
// caller gets the cause at once, the upstream is told (the slow tool
// writes its marker), and the instance serves on.
func TestStartAbortReachesUpstream(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	marker := filepath.Join(t.TempDir(), "cancelled")
	args, _ := json.Marshal(map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30, "steps": 300, "marker": marker},
		"_meta": map[string]any{"progressToken": "p"}})
	progress := newProgressLog()
	done := make(outcomes, 2)
	started := inst.Start(context.Background(), Request{Method: "tools/call", Params: args,
		ProgressToken: json.RawMessage(`"p"`), OnProgress: progress.add}, done)
	require.NotNil(t, started)
	select {
	case <-progress.first:
	case <-time.After(waitTimeout):
		t.Fatal("no progress from the slow tool")
	}
	why := errors.New("given up")
	started.Abort(why)
	started.Abort(why) // again: nothing more
	got := done.await(t)
	assert.Nil(t, got.raw)
	assert.ErrorIs(t, got.err, why)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && string(b) == "cancelled"
	}, waitTimeout, 10*time.Millisecond, "the upstream was never told the request was given up")
	assert.Empty(t, done, "completed once")

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := inst.CallTool(ctx, Call{Name: "echo", Arguments: json.RawMessage(`{"text":"still here"}`)})
	require.NoError(t, err)
}

// A started request pending when the connection ends completes with an
// error (the server's own, when it answers its calls as it exits, else
// the connection's); one started on a closed connection with the
// connection's.
func TestStartedRequestEndsWithTheConnection(t *testing.T) {
	t.Parallel()
	inst := startDemo(t, "tools", Options{})
	args := json.RawMessage(`{"name":"slow","arguments":{"seconds":30,"steps":1}}`)
	done := make(outcomes, 2)
	require.NotNil(t, inst.Start(context.Background(), Request{Method: "tools/call", Params: args}, done))
	require.NoError(t, inst.Close())
	got := done.await(t)
	assert.Nil(t, got.raw)
	assert.Error(t, got.err)

	again := make(outcomes, 1)
	require.NotNil(t, inst.Start(context.Background(), Request{Method: "tools/call", Params: args}, again))
	assert.ErrorIs(t, again.await(t).err, ErrClosed)
}

// Start never waits for an upstream that does not read: what its stdin
// does not take goes on a goroutine, under the request's context, and
// giving the request up ends it.
func TestStartDoesNotWaitForADeafUpstream(t *testing.T) {
	t.Parallel()
	inst, pid := startStopped(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": bigArguments})
	done := make(outcomes, 2)
	returned := make(chan *Started, 1)
	go func() { returned <- inst.Start(ctx, Request{Method: "tools/call", Params: params}, done) }()
	var started *Started
	select {
	case started = <-returned:
	case <-time.After(waitTimeout):
		t.Fatal("Start waited for the upstream to read")
	}
	require.NotNil(t, started)
	assert.Empty(t, done, "pending while its line is being written")
	cancel()
	started.Abort(context.Canceled)
	assert.ErrorIs(t, done.await(t).err, context.Canceled)
	requireCloseWithin(t, inst, waitTimeout)
	testproc.RequireReaped(t, pid)
}

// A started request's result is lent from the line it was read in, capped
// at its end: appending to it copies, and leaves what the reader read
// after it as it was.
func TestStartedResultIsCappedAtItsEnd(t *testing.T) {
	t.Parallel()
	c := &stdioConn{server: "lender", log: newLogRecorder().Logger(), pending: map[int64]waiter{}}
	got := make(outcomes, 1)
	var kept json.RawMessage
	s := &Started{i: &Instance{server: "lender"}, c: c, method: "tools/call", done: completeFunc(func(raw json.RawMessage, err error) {
		require.NoError(t, err)
		kept = raw
		got.Complete(raw, err)
	}), id: 1}
	c.pending[1] = waiter{started: s}
	buf := []byte(`{"jsonrpc":"2.0","id":1,"result":{"a":1}}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}`)
	first := buf[:bytes.IndexByte(buf, '\n')]
	c.dispatchOne(first)
	assert.JSONEq(t, `{"a":1}`, string(got.await(t).raw))
	assert.Equal(t, len(kept), cap(kept), "capped at its end")
	_ = append(kept, "overwritten"...)
	assert.Equal(t, "\n"+`{"jsonrpc":"2.0","id":2,"result":{}}`, string(buf[len(first):]), "the next line is left as it was")
}

// completeFunc is a Completion of a function.
type completeFunc func(json.RawMessage, error)

func (f completeFunc) Complete(raw json.RawMessage, err error) { f(raw, err) }
