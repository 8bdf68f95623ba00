package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// remoteConn adapts mcp-go's streamable-HTTP and SSE client transports,
// whose responses already carry the result as raw JSON, to conn.
//
// Concurrency rules: mcp-go calls the notification handler on the goroutine
// that reads a stream, so it must not block (Instance.notified does not);
// it runs each request of the upstream on a goroutine of its own, so the
// handler below refuses what is beyond maxServerRequests at once. Every
// HTTP exchange is bounded by its caller's ctx or, for what the aggregator
// sends on its own, by noticeTimeout; close ends the transport's streams.
type remoteConn struct {
	server    string
	t         transport.Interface
	log       *slog.Logger
	life      context.Context // ends when the connection does
	end       context.CancelFunc
	nextID    atomic.Int64
	requests  slots // requests of the upstream being handled
	notices   slots // cancellation notices under way
	dropped   throttledLog
	closed    chan struct{}
	closeOnce sync.Once
	failure   error // set before closed is closed
	closeErr  error
}

// newRemoteConn wraps a started transport; life is the context its streams
// run under and end cancels it.
func newRemoteConn(server string, t transport.Interface, log *slog.Logger, life context.Context, end context.CancelFunc,
	onNotify func(Notification), onRequest requestHandler) *remoteConn {
	c := &remoteConn{
		server: server, t: t, log: log, life: life, end: end,
		requests: newSlots(maxServerRequests), notices: newSlots(maxNotices), closed: make(chan struct{}),
	}
	t.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		if onNotify == nil {
			return
		}
		params, _ := rawjson.Marshal(n.Params)
		onNotify(Notification{Method: n.Method, Params: params})
	})
	if bt, ok := t.(transport.BidirectionalInterface); ok {
		bt.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			return c.answer(ctx, req, onRequest), nil
		})
	}
	if sse, ok := t.(*transport.SSE); ok {
		// Every response of a legacy SSE server comes down its one stream:
		// once that is gone, pending calls would only wait for their
		// deadlines, so the connection fails them now.
		sse.SetConnectionLostHandler(func(err error) {
			go c.fail(fmt.Errorf("server %q: its SSE stream ended: %w", server, err))
		})
	}
	return c
}

// answer handles a request of the upstream; nil sends no response. mcp-go
// gives each request a goroutine of its own and posts the answer from it,
// so a request beyond maxServerRequests is dropped rather than answered:
// answering a flood would be one more HTTP post per request.
func (c *remoteConn) answer(ctx context.Context, req transport.JSONRPCRequest, onRequest requestHandler) *transport.JSONRPCResponse {
	id, err := json.Marshal(req.ID)
	if err != nil {
		return nil
	}
	if !c.requests.take() {
		c.dropped.warn(c.log, "upstream sent more concurrent requests than the aggregator handles; dropped", "server", c.server,
			"method", req.Method, "id", string(id))
		return nil
	}
	defer c.requests.release()
	msg := &jsonrpc.Message{ID: id, Method: req.Method}
	if req.Params != nil {
		msg.Params, _ = rawjson.Marshal(req.Params)
	}
	resp, ok := answerLocally(msg, onRequest)
	if !ok {
		resp = onRequest(ctx, msg)
	}
	if resp == nil {
		return nil
	}
	out := &transport.JSONRPCResponse{JSONRPC: "2.0", ID: req.ID, Result: resp.Result}
	if resp.Error != nil {
		out.Result = nil
		out.Error = &mcp.JSONRPCErrorDetails{Code: resp.Error.Code, Message: resp.Error.Message}
		if len(resp.Error.Data) > 0 {
			out.Error.Data = resp.Error.Data
		}
	}
	return out
}

func (c *remoteConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	select {
	case <-c.closed:
		return nil, c.closedErr()
	default:
	}
	id := c.nextID.Add(1)
	// The exchange also ends when the connection does: the transport itself
	// does not promise to release a request it registers while closing.
	exchange, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life, func() { cancel(ErrClosed) })
	defer stop()
	exchange, report := withSizeReport(exchange)
	resp, err := c.t.SendRequest(exchange, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method, Params: params,
	})
	if tooLong := report.tooLong(); tooLong != nil {
		return nil, &oversizedResponse{server: c.server, TooLongError: tooLong}
	}
	if ctx.Err() != nil {
		c.cancelled(id, context.Cause(ctx))
		return nil, context.Cause(ctx)
	}
	if err != nil {
		select {
		case <-c.closed:
			return nil, c.closedErr()
		default:
		}
		return nil, fmt.Errorf("server %q: %w", c.server, err)
	}
	if resp.Error != nil {
		data, _ := rawjson.Marshal(resp.Error.Data)
		if resp.Error.Data == nil {
			data = nil
		}
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: data}
	}
	return resp.Result, nil
}

// cancelled tells the upstream a request was given up, off the caller's
// path and with its own time limit: an upstream that does not answer must
// not hold the caller past its deadline.
func (c *remoteConn) cancelled(id int64, why error) {
	if !c.notices.take() {
		return // advisory; the upstream is not keeping up anyway
	}
	go func() {
		defer c.notices.release()
		ctx, cancel := context.WithTimeout(c.life, noticeTimeout)
		defer cancel()
		_ = c.notify(ctx, "notifications/cancelled", cancelledParams{RequestID: id, Reason: why.Error()})
	}()
}

func (c *remoteConn) notify(ctx context.Context, method string, params any) error {
	n := mcp.JSONRPCNotification{JSONRPC: "2.0", Notification: mcp.Notification{Method: method}}
	if params != nil {
		raw, err := rawjson.Marshal(params)
		if err != nil {
			return err
		}
		var fields map[string]any
		if err := json.Unmarshal(raw, &fields); err != nil {
			return err
		}
		n.Params.AdditionalFields = fields
	}
	return c.t.SendNotification(ctx, n)
}

func (c *remoteConn) done() <-chan struct{} { return c.closed }

func (c *remoteConn) err() error {
	select {
	case <-c.closed:
		return c.failure
	default:
		return nil
	}
}

// closedErr says why calls fail; only valid once closed is closed.
func (c *remoteConn) closedErr() error {
	if c.failure != nil {
		return fmt.Errorf("%w: %v", ErrClosed, c.failure)
	}
	return ErrClosed
}

// fail ends the connection, once: pending calls fail at once and the
// transport's streams end.
func (c *remoteConn) fail(err error) {
	c.closeOnce.Do(func() {
		c.failure = err
		close(c.closed)
		c.closeErr = c.t.Close()
		c.end()
	})
}

func (c *remoteConn) close() error {
	c.fail(fmt.Errorf("server %q was closed", c.server))
	return c.closeErr
}
