package downstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// startingHandler is a stdioHandler that is also a Starter: it takes the
// method "started" without answering, hands its Completion and context
// out on started, and panics in Start on "panics".
type startingHandler struct {
	*stdioHandler
	started chan startedReq
}

type startedReq struct {
	id   string
	ctx  context.Context
	done Completion
}

func (h *startingHandler) Start(ctx context.Context, req *Request, done Completion) bool {
	switch req.Msg.Method {
	case "started":
		h.started <- startedReq{id: string(req.Msg.ID), ctx: ctx, done: done}
		return true
	case "panics":
		panic("a bug")
	}
	return false
}

func newStartingHandler() *startingHandler {
	return &startingHandler{stdioHandler: newStdioHandler(), started: make(chan startedReq, 8)}
}

func (h *startingHandler) next(t *testing.T) startedReq {
	t.Helper()
	select {
	case s := <-h.started:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was started")
		return startedReq{}
	}
}

func result(id string) *jsonrpc.Message {
	body, _ := json.Marshal(map[string]string{"answered": id})
	return &jsonrpc.Message{Result: body}
}

// A request a Starter takes leaves the reader free: what comes after it
// is served while it is pending, and each started request gets its own
// answer, once, whenever it completes.
func TestStdioStarterReadsOn(t *testing.T) {
	h := newStartingHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"started"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"started"}`)
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	first, second := h.next(t), h.next(t)
	assert.Equal(t, "3", string(p.next(t)["id"]), "served while two are pending")
	second.done.Complete(result(second.id))
	second.done.Complete(result("again")) // ignored
	m := p.next(t)
	assert.Equal(t, "2", string(m["id"]))
	assert.JSONEq(t, `{"answered":"2"}`, string(m["result"]))
	first.done.Complete(result(first.id))
	m = p.next(t)
	assert.Equal(t, "1", string(m["id"]))
	assert.JSONEq(t, `{"answered":"1"}`, string(m["result"]))
	// The id is free again once answered.
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	assert.Equal(t, "1", string(p.next(t)["id"]))
}

// A started request the client cancels sees its context end; answered
// with nil, it gets no response.
func TestStdioStarterCancellation(t *testing.T) {
	h := newStartingHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":"c","method":"started"}`)
	s := h.next(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}`)
	select {
	case <-s.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the started request's context did not end")
	}
	s.done.Complete(nil)
	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	assert.Equal(t, "4", string(p.next(t)["id"]), "no response for the cancelled request")
}

// At the end of input, a started request still pending is waited for
// (within the grace), and its answer written.
func TestStdioStarterDrain(t *testing.T) {
	h := newStartingHandler()
	p := startStdio(t, h, StdioOptions{DrainGrace: time.Minute})
	p.send(t, `{"jsonrpc":"2.0","id":9,"method":"started"}`)
	s := h.next(t)
	require.NoError(t, p.in.Close())
	// Had the connection ended at the end of input, the answer would
	// find the client's queue closed, and never be written.
	s.done.Complete(result(s.id))
	assert.Equal(t, "9", string(p.next(t)["id"]))
	require.NoError(t, <-p.served)
}

// A Starter that panics answers its request with an internal error, and
// the connection goes on.
func TestStdioStarterPanic(t *testing.T) {
	h := newStartingHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":5,"method":"panics"}`)
	m := p.next(t)
	assert.Equal(t, "5", string(m["id"]))
	assert.Contains(t, string(m["error"]), "internal error while serving panics")
	p.send(t, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	assert.Equal(t, "6", string(p.next(t)["id"]))
}
