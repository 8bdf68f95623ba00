package upstream

import (
	"context"
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// Completion takes the outcome of a request sent with Instance.Start: what
// Do would have returned for it. The result is lent: it is valid until
// Complete returns (it is read where the upstream's answer was read), and
// a Completion that keeps it, or hands it to another goroutine, copies it.
type Completion interface {
	Complete(result json.RawMessage, err error)
}

// Start is Do for a caller that does not wait for the answer: it sends r
// and returns the request in flight, and done.Complete is later called
// once with what Do would have returned, on the goroutine that has the
// outcome (most often the one that reads the upstream's answers, which
// waits meanwhile: Complete must not block). Start itself never waits: it
// writes what the upstream's stdin takes at once, and leaves the rest of a
// write to a goroutine of its own, under ctx as Do's write is. Unlike Do's,
// the request does not watch ctx for its end: the caller gives it up with
// Abort (as the end of ctx gives up Do's: the upstream is sent
// notifications/cancelled, and done gets the cause). A request whose ctx
// has ended already when Start is called is given up at once.
//
// Start returns nil, having done nothing, for a request it cannot send
// that way: to an upstream not over stdio (its requests are HTTP
// exchanges), of the 2026-07-28 generation's rounds or subscriptions, or
// with KeepProgress. The caller then calls Do.
func (i *Instance) Start(ctx context.Context, r Request, done Completion) *Started {
	sc, direct := i.conn.(*stdioConn)
	if !direct || r.Method == "" || r.KeepProgress != nil {
		return nil
	}
	if protocol.Modern(i.protocol) && (multiRound(r.Method) || r.Method == "resources/subscribe" || r.Method == "resources/unsubscribe") {
		return nil
	}
	s := &Started{i: i, c: sc, ctx: ctx, method: r.Method, done: done}
	var params json.RawMessage
	params, s.progressKey = i.outgoing(ctx, r)
	_, s.flight = i.flights.begin(ctx, r.Method, r.OnServerRequest, r.Principal, false)
	sc.start(s, params)
	return s
}

// Started is a request sent with Start, pending until its answer, Abort
// or the connection's end.
type Started struct {
	i           *Instance
	c           *stdioConn
	ctx         context.Context
	method      string
	done        Completion
	id          int64
	flight      uint64
	progressKey int64 // the progress registration to end; 0: none
}

// start sends s's request, params already encoded (none when empty). The
// call is pending before its request goes out, and answered by whoever
// takes it out of pending: the reader (its answer), fail (the connection's
// end), Abort or a write that failed.
func (c *stdioConn) start(s *Started, params json.RawMessage) {
	s.id = c.nextID.Add(1)
	buf := lineBuffers.Get().(*[]byte)
	line := jsonrpc.AppendRequestLine((*buf)[:0], s.id, s.method, params)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		go func() {
			<-c.closed // fail takes pending away just before closing it
			s.finish(nil, c.closedErr())
		}()
		return
	}
	c.pending[s.id] = waiter{started: s}
	c.mu.Unlock()
	if s.ctx.Err() != nil {
		s.Abort(context.Cause(s.ctx))
		return
	}
	n, holding := c.tryWrite(s.ctx, line)
	if n == len(line) {
		if cap(line) <= maxPooledLine {
			*buf = line
			lineBuffers.Put(buf)
		}
		return
	}
	go s.write(line, buf, n, holding)
}

// tryWrite writes line without waiting, if the write slot is free and the
// connection and ctx are live: n bytes went out, and when 0 < n <
// len(line), the slot is still held (holding) for the rest.
func (c *stdioConn) tryWrite(ctx context.Context, line []byte) (n int, holding bool) {
	select {
	case c.writeSlot <- struct{}{}:
	default:
		return 0, false
	}
	select {
	case <-c.closed:
		<-c.writeSlot
		return 0, false
	default:
	}
	if ctx.Err() == nil {
		n, _ = c.pipe.TryWrite(line) // an error shows again in the waiting write
	}
	if n == 0 || n == len(line) {
		<-c.writeSlot
		return n, false
	}
	return n, true
}

// write writes what tryWrite left of line, waiting as Do's write does; a
// write that fails answers the call with why.
func (s *Started) write(line []byte, buf *[]byte, n int, holding bool) {
	c := s.c
	var err error
	if holding {
		err = c.writeRest(s.ctx, line, n)
		<-c.writeSlot
	} else {
		err = c.write(s.ctx, line)
	}
	if err != nil {
		// Part of the request may have gone out: an answer may yet come.
		if c.abandon(s.id) {
			s.finish(nil, err)
		}
		return
	}
	if cap(line) <= maxPooledLine {
		*buf = line
		lineBuffers.Put(buf)
	}
}

// Abort gives the request up, as the end of its context gives up Do's:
// unless it was answered already, the upstream is told, and done gets
// cause (nil: context.Canceled). It may be called more than once, and
// from any goroutine.
func (s *Started) Abort(cause error) {
	if !s.c.abandon(s.id) {
		return // answered meanwhile
	}
	if cause == nil {
		cause = context.Canceled
	}
	s.c.cancelled(s.id, cause)
	s.finish(nil, cause)
}

// answered takes the call's answer (waiter.deliver).
func (s *Started) answered(r reply) {
	s.finish(r.result, r.err)
}

// finish ends what the call held on the instance and hands on its outcome.
func (s *Started) finish(raw json.RawMessage, err error) {
	i := s.i
	i.flights.end(s.flight)
	if s.progressKey != 0 {
		i.endProgress(s.progressKey)
	}
	if err == nil {
		if err = i.notObject(s.method, raw); err != nil {
			raw = nil
		}
	}
	s.done.Complete(raw, err)
}
