package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// remoteConn adapts mcp-go's streamable-HTTP and SSE client transports,
// whose responses already carry the result as raw JSON, to conn.
type remoteConn struct {
	server    string
	t         transport.Interface
	nextID    atomic.Int64
	closed    chan struct{}
	closeOnce sync.Once
	end       context.CancelFunc // ends the transport's streams
}

func newRemoteConn(server string, t transport.Interface, onNotify func(Notification),
	onRequest func(string, json.RawMessage) (any, *RPCError)) *remoteConn {
	c := &remoteConn{server: server, t: t, closed: make(chan struct{})}
	t.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		if onNotify == nil {
			return
		}
		params, _ := rawjson.Marshal(n.Params)
		onNotify(Notification{Method: n.Method, Params: params})
	})
	if bt, ok := t.(transport.BidirectionalInterface); ok {
		bt.SetRequestHandler(func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			resp := &transport.JSONRPCResponse{JSONRPC: "2.0", ID: req.ID}
			if req.Method == "ping" {
				resp.Result = json.RawMessage(`{}`)
				return resp, nil
			}
			if onRequest == nil {
				resp.Error = &mcp.JSONRPCErrorDetails{Code: -32601, Message: "method not supported by the aggregator: " + req.Method}
				return resp, nil
			}
			params, _ := rawjson.Marshal(req.Params)
			result, rpcErr := onRequest(req.Method, params)
			if rpcErr != nil {
				resp.Error = &mcp.JSONRPCErrorDetails{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
				return resp, nil
			}
			resp.Result, _ = rawjson.Marshal(result)
			return resp, nil
		})
	}
	return c
}

func (c *remoteConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	select {
	case <-c.closed:
		return nil, ErrClosed
	default:
	}
	id := c.nextID.Add(1)
	resp, err := c.t.SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method, Params: params,
	})
	if ctx.Err() != nil {
		_ = c.notify(context.Background(), "notifications/cancelled",
			cancelledParams{RequestID: id, Reason: context.Cause(ctx).Error()})
		return nil, context.Cause(ctx)
	}
	if err != nil {
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

func (c *remoteConn) err() error { return nil }

func (c *remoteConn) close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.t.Close()
		if c.end != nil {
			c.end()
		}
	})
	return err
}
