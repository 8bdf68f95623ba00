package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/bridge"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Start serves req as Handle does, without a goroutine of its own waiting
// for the upstream (downstream.Starter): a tools/call is taken through the
// forwarder's steps at once on the transport's goroutine, sent with
// upstream.Instance.Start, and answered from the goroutine that reads the
// upstream's answer. Wherever a later step would wait (a lease to start, a
// first call binding its session, instance limits, a task, an error that
// may offer a login, an upstream over HTTP), the rest goes on a goroutine
// of its own, the same steps waiting where they wait. Start returns false, having done
// nothing, for a request Handle is to serve: any other method, a call
// while tracing (its request span), a call the bridge holds, a call whose
// params or tool are not ready to go, a call a policy may ask about.
func (p *Proxy) Start(ctx context.Context, req *downstream.Request, done downstream.Completion) bool {
	if req.Msg.Method != "tools/call" || p.opts.Tracer != nil || bridge.Bridgeable(req) || invalidLogLevel(req) != nil {
		return false
	}
	st := p.current()
	params, ok := parseCallParams(req.Msg.Params, st.catalog)
	if !ok || params.Entry == nil || len(params.Task) > 0 || leaseNameError(req, params.Lease) != nil {
		return false // answered by Handle, which says why or waits for the catalog
	}
	req.Profile = st.requestProfile(req.Caller(), req.View)
	c := &startedCall{done: done}
	c.f.p, c.f.ctx = p, ctx
	c.f.inv.callOf(req, params, st)
	c.f.begin()
	first := c.f.acquire(true)
	if first == stepWaits && !c.f.admitted {
		// Nothing was done (a policy that may ask, a tool not exported
		// as it stands): Handle serves it, on a goroutine the transport
		// keeps for such requests, not one started for each.
		return false
	}
	if !req.OnCancel(c) {
		// A transport that does not tell: its context does.
		c.unwatch = context.AfterFunc(ctx, func() { c.Cancel(context.Cause(ctx)) })
	}
	c.start(first)
	return true
}

// startedCall is a tools/call that Start serves: its forward, and where
// its response goes.
type startedCall struct {
	f    forward
	done downstream.Completion

	// mu guards what tells the request in flight upstream of the call's
	// cancellation (Cancel), which may come before it is sent.
	mu        sync.Mutex
	up        *upstream.Started // nil until sent, and when sent with Do
	cancelled bool
	cause     error
	unwatch   func() bool // ends the watch on the request's context; nil: none
}

// Cancel gives the request in flight upstream up when the call is
// cancelled (downstream.Canceler): the client's cancellation, the call's
// deadline, the end of its session.
func (c *startedCall) Cancel(cause error) {
	c.mu.Lock()
	c.cancelled, c.cause = true, cause
	up := c.up
	c.mu.Unlock()
	if up != nil {
		up.Abort(cause)
	}
}

// send sends the call with inst.Start, and has its cancellation give it
// up; false when it cannot go that way.
func (c *startedCall) send(inst *upstream.Instance) bool {
	f := &c.f
	up := inst.Start(f.upCtx, f.up, c)
	if up == nil {
		return false
	}
	c.mu.Lock()
	c.up = up
	cancelled, cause := c.cancelled, c.cause
	c.mu.Unlock()
	if cancelled {
		up.Abort(cause)
	}
	return true
}

// start takes the call, whose acquire step came to first, through the
// steps that need no wait, and sends it.
func (c *startedCall) start(first step) {
	f := &c.f
	if c.stopped(first) || c.stopped(f.prepare(true)) {
		return
	}
	inst, ok := f.to.(*upstream.Instance)
	if !ok || !c.send(inst) {
		go c.wait()
	}
}

// stopped reports whether the call stops at a step that came to s: it is
// answered now (stepAnswered), or the rest goes on a goroutine of its own
// (stepWaits).
func (c *startedCall) stopped(s step) bool {
	switch s {
	case stepAnswered:
		c.answer()
	case stepWaits:
		go c.wait()
	default:
		return false
	}
	return true
}

// wait serves the rest of the call on the goroutine it runs on, waiting
// wherever a step waits.
func (c *startedCall) wait() {
	defer c.recovered()
	c.f.run()
	c.answer()
}

// Complete takes the upstream's answer (upstream.Completion), on the
// goroutine that read it. raw is lent: what finish makes of it is encoded
// into the client's line before Complete returns, and what goes on
// another goroutine takes a copy.
func (c *startedCall) Complete(raw json.RawMessage, err error) {
	defer c.recovered()
	if c.f.finish(raw, err, true) == stepWaits {
		raw = bytes.Clone(raw)
		go func() {
			defer c.recovered()
			c.f.finish(raw, err, false)
			c.answer()
		}()
		return
	}
	c.answer()
}

// answer ends the forward and sends its response, encoded for the
// request's generation as dispatch encodes it.
func (c *startedCall) answer() {
	f := &c.f
	if c.unwatch != nil {
		c.unwatch()
	}
	f.end()
	c.done.Complete(f.p.encode(f.inv.req, response(f.result, f.rpcErr, f.err)))
}

// recovered turns a panic while serving the call into an internal error
// response, as the transports do for Handle, rather than the end of the
// process; what the call holds is given back.
func (c *startedCall) recovered() {
	v := recover()
	if v == nil {
		return
	}
	f := &c.f
	f.p.log.Error("the handler panicked", "method", "tools/call", "panic", v, "stack", string(debug.Stack()))
	f.result, f.err = nil, nil
	f.rpcErr = jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error while serving tools/call")
	c.answer()
}
