package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// conn is a JSON-RPC channel to one upstream, whatever carries it.
//
// Concurrency: every method may be called from any goroutine. close unblocks
// every pending call and every write under way, and returns once nothing of
// the upstream is left.
type conn interface {
	// call sends a request and waits for its response. ctx bounds all of it,
	// the write of the request included. If ctx ends after the request went
	// out, the upstream is sent notifications/cancelled for it.
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
	notify(ctx context.Context, method string, params any) error
	// done is closed when the connection is gone; err then says why.
	done() <-chan struct{}
	err() error
	close() error
}

// ErrClosed is returned for calls on an instance that was closed or died.
var ErrClosed = errors.New("upstream connection closed")

// RPCError is a JSON-RPC error returned by an upstream, kept exactly: code,
// message and the raw data member.
type RPCError = jsonrpc.Error

// Notification is a message the upstream sent without an id.
type Notification struct {
	Method string
	Params json.RawMessage
	// flight is the Do on whose response stream it came (HTTP), or 0.
	flight uint64
}

// oversizedResponse fails a call whose response was over the size limit.
type oversizedResponse struct {
	server string
	exact  bool // Size is the whole response, not what was read of it
	*jsonrpc.TooLongError
}

func (e *oversizedResponse) Error() string {
	if !e.exact {
		return fmt.Sprintf("server %q: its response exceeds the limit of %d bytes", e.server, e.Limit)
	}
	return fmt.Sprintf("server %q: its response of %d bytes exceeds the limit of %d bytes", e.server, e.Size, e.Limit)
}

func (e *oversizedResponse) Unwrap() error { return e.TooLongError }

// requestHandler answers a request the upstream sent (sampling, elicitation,
// roots). It returns the response to send, or nil to send none. ctx ends when
// the connection does. flight is the Do (see flightOf) on whose response
// stream the request arrived, or 0 when the transport cannot tell (stdio)
// or it came on no request's stream.
type requestHandler func(ctx context.Context, req *jsonrpc.Message, flight uint64) *jsonrpc.Message

// cancelledParams is the body of notifications/cancelled.
type cancelledParams struct {
	RequestID any    `json:"requestId"`
	Reason    string `json:"reason,omitempty"`
}

// Bounds on the work an upstream can make the aggregator do on its own.
const (
	// noticeTimeout bounds a write the aggregator starts by itself rather
	// than for a caller: a cancellation notice, the answer to an upstream's
	// request.
	noticeTimeout = 5 * time.Second
	// maxServerRequests is how many requests from one upstream are handled
	// at once; more are answered "too many concurrent requests" or dropped.
	maxServerRequests = 16
	// maxNotices is how many cancellation notices to one upstream may be
	// under way at once; beyond that they are skipped (they are advisory).
	maxNotices = 16
)

// tooManyRequests is the answer to a request beyond maxServerRequests.
func tooManyRequests(id json.RawMessage) *jsonrpc.Message {
	return jsonrpc.Failure(id, jsonrpc.Errorf(jsonrpc.CodeInternalError, "too many concurrent requests"))
}

// answerLocally answers what the aggregator answers itself: ping, and any
// request when there is no handler.
func answerLocally(req *jsonrpc.Message, handle requestHandler) (*jsonrpc.Message, bool) {
	switch {
	case req.Method == "ping":
		return &jsonrpc.Message{ID: req.ID, Result: json.RawMessage(`{}`)}, true
	case handle == nil:
		return jsonrpc.Failure(req.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not supported by the aggregator: %s", req.Method)), true
	}
	return nil, false
}
