package upstream

import (
	"context"
	"encoding/json"
	"errors"
)

// conn is a JSON-RPC channel to one upstream, whatever carries it.
type conn interface {
	// call sends a request and waits for its response. If ctx ends first,
	// the upstream is sent notifications/cancelled for the request.
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
	notify(ctx context.Context, method string, params any) error
	// done is closed when the connection is gone; err then says why.
	done() <-chan struct{}
	err() error
	close() error
}

// ErrClosed is returned for calls on an instance that was closed or died.
var ErrClosed = errors.New("upstream connection closed")

// cancelledParams is the body of notifications/cancelled.
type cancelledParams struct {
	RequestID any    `json:"requestId"`
	Reason    string `json:"reason,omitempty"`
}
