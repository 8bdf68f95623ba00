package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// Why a server-to-client request (Session.Request, Request.Ask) failed
// without an answer from the client; a ctx that ended is reported as ctx's
// own error instead.
var (
	// ErrNoStream: no stream can carry the request to the client now (an
	// HTTP session without a GET stream, a stream whose queue is full, a
	// stdio connection that did not initialize a session).
	ErrNoStream = errors.New("no stream to the client can carry the request")
	// ErrTooManyRequests: the session already has MaxPendingRequests
	// requests awaiting the client's answer.
	ErrTooManyRequests = errors.New("too many requests to the client await an answer")
	// ErrSessionGone: the session ended (or the client closed its input)
	// before the client answered.
	ErrSessionGone = errors.New("the client session ended before it answered")
)

// MaxPendingRequests bounds the server-to-client requests of one session
// that await the client's answer; one more fails at once.
const MaxPendingRequests = 64

// outgoing is one session's server-to-client requests awaiting the client's
// response. It issues their ids ("s-1", "s-2", ...: strings, so that no
// client-side id scheme is ever echoed back at the wrong waiter) and hands
// each response to its waiter. The transport owns the streams; outgoing
// only correlates.
type outgoing struct {
	mu      sync.Mutex
	seq     uint64
	waiting map[string]chan *jsonrpc.Message // by jsonrpc.IDKey; each buffered for its one response
	done    chan struct{}                    // closed when the session ends
	ended   bool
}

func newOutgoing() *outgoing {
	return &outgoing{waiting: make(map[string]chan *jsonrpc.Message), done: make(chan struct{})}
}

// call sends a request through send and waits for the client's response,
// which it returns as the client sent it (a result or a JSON-RPC error; its
// id is the one issued here). When ctx ends first, the client is told with
// notifications/cancelled through cancelled, and ctx's error returned.
// send and cancelled must not block.
func (o *outgoing) call(ctx context.Context, method string, params json.RawMessage,
	send func(*jsonrpc.Message) bool, cancelled func(*jsonrpc.Message)) (*jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, answer, err := o.open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if !send(&jsonrpc.Message{ID: id, Method: method, Params: params}) {
		if o.forget(id) {
			return nil, fmt.Errorf("%s: %w", method, ErrNoStream)
		}
		return <-answer, nil // answered before we learnt the stream refused it
	}
	select {
	case resp := <-answer:
		return resp, nil
	case <-o.done:
		if !o.forget(id) {
			return <-answer, nil
		}
		return nil, fmt.Errorf("%s: %w", method, ErrSessionGone)
	case <-ctx.Done():
		if !o.forget(id) {
			return <-answer, nil // the answer arrived as ctx ended: it wins
		}
		// The spec: a request the sender gives up on is cancelled with
		// notifications/cancelled; a late response is then ignored.
		cancelled(cancelNotice(id, context.Cause(ctx)))
		return nil, ctx.Err()
	}
}

// open issues the next id and registers its waiter.
func (o *outgoing) open() (json.RawMessage, chan *jsonrpc.Message, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.ended:
		return nil, nil, ErrSessionGone
	case len(o.waiting) >= MaxPendingRequests:
		return nil, nil, ErrTooManyRequests
	}
	o.seq++
	id := json.RawMessage(`"s-` + strconv.FormatUint(o.seq, 10) + `"`)
	answer := make(chan *jsonrpc.Message, 1)
	o.waiting[jsonrpc.IDKey(id)] = answer
	return id, answer, nil
}

// forget withdraws the waiter of id; false means a response already took
// it, and is in its channel.
func (o *outgoing) forget(id json.RawMessage) bool {
	key := jsonrpc.IDKey(id)
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.waiting[key]
	delete(o.waiting, key)
	return ok
}

// deliver completes the request msg answers; false when none awaits it
// (never sent, already answered, given up on).
func (o *outgoing) deliver(msg *jsonrpc.Message) bool {
	key := jsonrpc.IDKey(msg.ID)
	o.mu.Lock()
	defer o.mu.Unlock()
	answer, ok := o.waiting[key]
	if ok {
		delete(o.waiting, key)
		answer <- msg // buffered for exactly this message: never blocks
	}
	return ok
}

// pending counts the requests awaiting an answer.
func (o *outgoing) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.waiting)
}

// end fails every waiting call and every later one with ErrSessionGone.
func (o *outgoing) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.ended {
		o.ended = true
		close(o.done)
	}
}

// cancelNotice is notifications/cancelled for the request with id.
func cancelNotice(id json.RawMessage, cause error) *jsonrpc.Message {
	reason := "the server stopped waiting"
	if cause != nil {
		reason += ": " + cause.Error()
	}
	m, _ := jsonrpc.Notification("notifications/cancelled", struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}{id, reason})
	return m
}

// within returns ctx, also ended when life ends (with life's cause): an
// Ask is bounded by the request it belongs to as well as by its caller.
func within(ctx, life context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(life, func() { cancel(context.Cause(life)) })
	return ctx, func() { stop(); cancel(nil) }
}

// usesRequests reports whether a request may be followed by server-to-client
// requests: the session-based generation does, after initialize; the
// sessionless one (2026-07-28) carries them in input_required results
// instead, and its stdio binding forbids requests on stdout.
func usesRequests(req *Request) bool {
	return req.Msg.Method != "initialize" && req.Protocol != "" && !protocol.Modern(req.Protocol)
}
