package downstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// StdioOptions bound one stdio connection.
type StdioOptions struct {
	Logger *slog.Logger
	// MaxMessage bounds one incoming line; zero means 32 MiB.
	MaxMessage int
	// MaxInFlight bounds requests being served or waiting to be written;
	// reading pauses while it is reached, so a client that stops reading
	// its results stops being read. When it is reached while the client
	// reads, a further request is refused after a short wait instead, so
	// that the client's answers and cancellations behind it are read.
	// Zero means 256.
	MaxInFlight int
	// QueueSize bounds queued notifications (progress, list_changed); more
	// are dropped. Zero means 1024.
	QueueSize int
	// DrainGrace is how long requests in flight may finish after the client
	// closed its input; zero means 5 s.
	DrainGrace time.Duration
}

// DefaultMaxBody bounds one client message (an HTTP body, a stdio line).
const DefaultMaxBody = 32 << 20

// stdioKey is the session key of the (only) stdio connection.
const stdioKey = "stdio"

// ServeStdio serves one client speaking newline-delimited JSON-RPC on in and
// out until in ends (then requests in flight get DrainGrace to finish), out
// fails, or ctx ends.
//
// Concurrency: one goroutine at a time reads; a request the Handler's
// Starter takes is answered from whichever goroutine completes it, and any
// other is served on a worker; one goroutine at a time writes, in queue
// order: the queue's writer, or the goroutine answering the only response
// in flight (see writeNow); nothing else writes to out. The reading moves
// from worker to worker (see read).
func ServeStdio(ctx context.Context, h Handler, in io.Reader, out io.Writer, opts StdioOptions) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxBody
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 256
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1024
	}
	if opts.DrainGrace <= 0 {
		opts.DrainGrace = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &stdioSession{
		log: opts.Logger, h: h, ob: newLineQueue(opts.QueueSize),
		slots:   newSlots(opts.MaxInFlight),
		workers: workers{idle: make(chan func())}, asks: newOutgoing(),
	}
	s.send = s.Notify
	s.starter, _ = h.(Starter)
	s.detached = context.WithoutCancel(ctx)
	writeErr := make(chan error, 1)
	// More than one request in flight: responses are likely to be
	// completing together, worth one write.
	s.ob.gather = func() bool { return s.slots.taken() > 1 }
	if tw, ok := out.(tryWriter); ok && tw.Direct() {
		s.ob.try, s.ob.done = tw.TryWrite, s.written
	}
	go func() { writeErr <- s.ob.drain(out, s.written) }()
	// SessionOpened follows a successful initialize (a sessionless client
	// never sends one, and hears of changes through subscriptions/listen);
	// SessionClosed always comes, so that what the connection held ends.
	defer h.SessionClosed(s)

	readErr := make(chan error, 1)
	s.in, s.inErr = jsonrpc.NewReader(in, opts.MaxMessage), readErr
	s.follow = func() { s.read(ctx) }
	go s.follow()
	var err error
	select {
	case err = <-readErr:
		// End of input: let what is in flight finish, within the grace;
		// listen streams have no end of their own, and no one to hear them,
		// and the client can answer no request any more.
		s.cancelListens()
		s.asks.end()
		if !s.idle(opts.DrainGrace) {
			s.log.Warn("client closed its input; cancelling requests still in flight", "grace", opts.DrainGrace)
		}
	case err = <-writeErr:
		err = fmt.Errorf("writing to the client: %w", err)
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	s.asks.end()
	s.cancelAll()
	s.ob.close()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// stdioSession is the stdio connection as a Session.
type stdioSession struct {
	log     *slog.Logger
	h       Handler
	starter Starter // h, when it is one; nil otherwise
	ob      *lineQueue
	slots   *slots // one per request in flight, released once its response is written
	workers workers

	protocol atomic.Pointer[string]          // negotiated at initialize
	caps     atomic.Pointer[json.RawMessage] // declared at initialize
	openOnce sync.Once
	asks     *outgoing                   // server-to-client requests awaiting the client
	send     func(*jsonrpc.Message) bool // Notify, made once
	detached context.Context             // the session's context without its end, for requests (see start)

	// initialized is where the connection's one initialize stands: none
	// yet (or only failed ones), one being served, or one that succeeded.
	initialized atomic.Int32

	mu    sync.Mutex
	calls callTable // in-flight requests by id
	wg    sync.WaitGroup

	// in is read by one goroutine at a time (see read), which sends why
	// reading ended to inErr; follow reads on.
	in     *jsonrpc.Reader
	inErr  chan<- error
	follow func()
}

func (s *stdioSession) Key() string { return stdioKey }

// Notify implements Session; the message is encoded into a buffer of the
// queue's, as a response is.
func (s *stdioSession) Notify(msg *jsonrpc.Message) bool {
	line := s.ob.line()
	line.b = msg.Append(line.b[:0])
	if !s.ob.add(line.b, line, false) {
		s.ob.release(line)
		return false
	}
	return true
}

// ClientCapabilities implements Session.
func (s *stdioSession) ClientCapabilities() json.RawMessage {
	if c := s.caps.Load(); c != nil {
		return *c
	}
	return nil
}

// Request implements Session: the connection carries it once the client
// initialized a session (the sessionless generation forbids requests on
// stdout).
func (s *stdioSession) Request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	if v := s.protocol.Load(); v == nil || protocol.Modern(*v) {
		return nil, fmt.Errorf("%s: %w: the client initialized no session", method, ErrNoStream)
	}
	return s.asks.call(ctx, method, params, s.Notify, func(m *jsonrpc.Message) { s.Notify(m) })
}

// written releases the slots of the responses the writer put on the wire.
func (s *stdioSession) written(responses int) {
	if responses > 0 {
		s.slots.release(responses)
	}
}

// read reads the client's messages; a request the Handler's Starter takes
// is started here, and reading goes on. For any other, it passes the
// reading on to a worker and serves the request itself. The goroutine that
// has just read a request is running, while a worker handed the request
// would first have to be scheduled, with the reader back in read(2) and
// holding its thread meanwhile. So the request goes on at once, and the wait
// for a worker falls on the next read, off the request's path (stdio at one
// call in flight: 8 % more calls per second in BenchmarkCall). When
// reading ends, why is sent to inErr.
func (s *stdioSession) read(ctx context.Context) {
	for {
		// Owned: a request's message points into the line, which no
		// later read changes, and the call keeps it.
		line, err := s.in.ReadOwned()
		if err != nil {
			// Declared here, where it is needed: errors.As would move it
			// to the heap for every message.
			var tooLong *jsonrpc.TooLongError
			if errors.As(err, &tooLong) {
				s.reject(tooLong.OversizedID(), jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("message of %d bytes exceeds the limit of %d bytes; send smaller arguments", tooLong.Size, tooLong.Limit))
				continue
			}
			s.inErr <- err
			return
		}
		// A line is never empty, and an object, the usual kind, needs no
		// further look.
		if line[0] != '{' && isBatch(line) {
			if !s.batch(ctx, line) {
				s.inErr <- ctx.Err()
				return
			}
			continue
		}
		// Decoded here, and copied into the call that serves a request
		// (start): a request's message costs no allocation of its own.
		var msg jsonrpc.Message
		if de := decodeClientInto(&msg, line); de != nil {
			s.reject(de.ID, de.Code, de.Reason)
			continue
		}
		switch {
		case msg.IsRequest():
			if ok, busy := s.acquire(ctx); !ok {
				if busy == nil {
					s.inErr <- ctx.Err()
					return
				}
				s.refuseBusy(msg.ID, busy)
				continue // refused: reading goes on
			}
			if call := s.start(ctx, &msg, nil); call != nil {
				req := call.prelude()
				if req == nil {
					s.wg.Done() // answered at once
					continue
				}
				if s.starter != nil && s.startCall(call, req) {
					continue // served without waiting: reading goes on here
				}
				s.workers.run(s.follow)
				call.respond(s.handle(call.ctx, req))
				s.wg.Done()
				return
			}
		default:
			m := new(jsonrpc.Message)
			*m = msg
			s.apply(ctx, m)
		}
	}
}

// apply takes a client message that is not a request: a response
// completes the request it answers (it is never a notification for the
// Handler), a cancellation cancels, any other notification goes to the
// Handler.
func (s *stdioSession) apply(ctx context.Context, msg *jsonrpc.Message) {
	switch {
	case msg.IsResponse():
		if !s.asks.deliver(msg) {
			s.log.Info("dropped a client response that no request awaits", "id", clip(string(msg.ID)))
		}
	case msg.Method == "notifications/cancelled":
		s.cancel(msg.Params)
	default:
		s.notified(ctx, msg)
	}
}

// slotWait is how long a request waits for a slot before the reader tells
// a full house of requests being served from a client that stopped
// reading (see acquire).
const slotWait = 250 * time.Millisecond

// codeBusy is the error of a request refused because MaxInFlight requests
// are in flight: JSON-RPC's range for server errors.
const codeBusy = -32000

// acquire takes a slot for a request (or a batch of them). While every
// slot is taken it waits, as long as output to the client is backed up: a
// client that stops reading its results stops being read. Otherwise the
// requests in flight are still being served, possibly waiting for an answer
// of the client's (a response to Ask, a cancellation) that comes after this
// request on the input; so after slotWait the request is refused, and
// reading goes on. It returns false when ctx ended or, with busy set, when
// the request is to be refused with busy.
func (s *stdioSession) acquire(ctx context.Context) (ok bool, busy *jsonrpc.Error) {
	if s.slots.take() {
		return true, nil
	}
	s.slots.waiting.Store(true)
	defer s.slots.waiting.Store(false)
	wait := time.NewTimer(slotWait)
	defer wait.Stop()
	for {
		// After waiting is set: a slot released from now on signals freed.
		if s.slots.take() {
			return true, nil
		}
		select {
		case <-s.slots.freed:
		case <-ctx.Done():
			return false, nil
		case <-wait.C:
			if s.ob.backedUp() {
				wait.Reset(slotWait)
				continue
			}
			return false, jsonrpc.Errorf(codeBusy,
				"too many requests in flight: at most %d at once; wait for a response before sending another request", s.slots.max)
		}
	}
}

// slots counts the requests in flight, up to max: a counter, so that
// taking and releasing one is an atomic operation rather than a channel's
// lock on every call's path. One goroutine at a time takes (the reader);
// any releases.
type slots struct {
	n       atomic.Int32
	max     int32
	waiting atomic.Bool   // the reader waits for a slot (acquire)
	freed   chan struct{} // signalled, while the reader waits, when a slot is released
}

func newSlots(max int) *slots {
	return &slots{max: int32(max), freed: make(chan struct{}, 1)}
}

// take takes a slot, if one is free.
func (l *slots) take() bool {
	for {
		n := l.n.Load()
		if n >= l.max {
			return false
		}
		if l.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release frees n slots, and tells a reader waiting for one.
func (l *slots) release(n int) {
	l.n.Add(-int32(n))
	if l.waiting.Load() {
		select {
		case l.freed <- struct{}{}:
		default:
		}
	}
}

// taken is the number of slots taken.
func (l *slots) taken() int { return int(l.n.Load()) }

// refuseBusy answers the request with id that acquire refused.
func (s *stdioSession) refuseBusy(id json.RawMessage, busy *jsonrpc.Error) {
	s.log.Info("refused a request: the client has the most requests in flight it may", "max", s.slots.max, "id", clip(string(id)))
	// Not a response in the queue's sense: it holds no slot.
	s.ob.push(jsonrpc.Failure(id, busy).Encode(), false)
}

// reply sends the response of a request served alone, which holds a slot
// until its response is written; nil: no response is due, and the slot is
// free at once.
func (s *stdioSession) reply(line []byte) {
	if line == nil {
		s.slots.release(1)
		return
	}
	s.ob.push(line, true)
}

// batch serves a JSON-RPC batch: its notifications and responses as they
// come, then its requests, each on a goroutine of its own and together
// holding one slot, answered by one array once the last is served. It
// returns false when ctx ended.
func (s *stdioSession) batch(ctx context.Context, line []byte) bool {
	protocol := ""
	if v := s.protocol.Load(); v != nil {
		protocol = *v
	}
	elems, e := splitBatch(line, protocol)
	if e != nil {
		s.reject(nil, e.Code, e.Message)
		return true
	}
	b := &batchAnswer{}
	var requests []*jsonrpc.Message
	for _, raw := range elems {
		msg, answer := decodeBatched(raw)
		switch {
		case msg == nil:
			b.add(answer)
		case msg.IsRequest():
			requests = append(requests, msg)
		default:
			s.apply(ctx, msg)
		}
	}
	if len(requests) == 0 {
		if array := b.array(); array != nil {
			s.ob.push(array, false)
		}
		return true
	}
	ok, busy := s.acquire(ctx)
	if !ok {
		if busy == nil {
			return false
		}
		for _, msg := range requests {
			s.log.Info("refused a request: the client has the most requests in flight it may", "max", s.slots.max, "id", clip(string(msg.ID)))
			b.add(jsonrpc.Failure(msg.ID, busy).Encode())
		}
		s.ob.push(b.array(), false)
		return true
	}
	b.pending = len(requests)
	b.done = func(array []byte) { s.reply(array) }
	for _, msg := range requests {
		if call := s.start(ctx, msg, b); call != nil {
			go call.serve()
		}
	}
	return true
}

// reject answers a message that could not be served with an error.
func (s *stdioSession) reject(id []byte, code int, reason string) {
	if id == nil {
		id = []byte("null")
	}
	s.log.Warn("invalid message from the client", "reason", clip(reason))
	s.ob.push(jsonrpc.Failure(id, &jsonrpc.Error{Code: code, Message: reason}).Encode(), false)
}

// stdioCall is one request being served: the Request the Handler sees and
// what serving it needs, in one allocation.
type stdioCall struct {
	Request
	msg jsonrpc.Message // Request.Msg
	s   *stdioSession
	ctx context.Context // ended by Request.Cancel
	// batch is the batch the request came in, which takes its response;
	// nil for a request on its own.
	batch *batchAnswer
	// completed is set by the response of a call the Handler's Starter
	// serves (Complete).
	completed atomic.Bool
	// cancelCtx ends ctx; Request.Cancel (cancel) also tells the watch.
	cancelCtx context.CancelCauseFunc
	watch     cancelWatch
}

// cancel is the call's Request.Cancel: it ends the call's context, and
// tells who watches it (Request.OnCancel).
func (c *stdioCall) cancel(cause error) {
	c.cancelCtx(cause)
	c.watch.cancel(context.Cause(c.ctx))
}

// start registers a request and returns the call that serves it, or nil
// when its id is in use by a request in flight (it is answered so). The
// call holds a copy of msg. Its response, or nil when none is due, goes to
// batch, or when that is nil to the client's queue.
func (s *stdioSession) start(ctx context.Context, msg *jsonrpc.Message, batch *batchAnswer) *stdioCall {
	c := &stdioCall{msg: *msg, s: s, batch: batch}
	key := keyOf(msg.ID)
	c.Msg, c.Session, c.Send, c.Principal = &c.msg, s, s.send, identity.Local()
	// Not a child of ctx, whose list of children every request would
	// otherwise join and leave under its lock: the session cancels its
	// requests itself when it ends (cancelAll), and one that starts after
	// ctx ended is cancelled here.
	c.ctx, c.cancelCtx = context.WithCancelCause(s.detached)
	c.Cancel, c.Request.watch = c.cancel, &c.watch
	s.mu.Lock()
	if s.calls.get(key) != nil {
		s.mu.Unlock()
		c.cancelCtx(nil)
		reason := "request id " + string(msg.ID) + " is already in use by a request in flight"
		s.log.Warn("invalid message from the client", "reason", clip(reason))
		c.reply(jsonrpc.Failure(msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: reason}).Encode())
		return nil
	}
	s.calls.put(key, c)
	s.wg.Add(1)
	if ctx.Err() != nil { // ServeStdio ends ctx before cancelAll takes mu
		c.Cancel(context.Cause(ctx))
	}
	s.mu.Unlock()
	return c
}

// callTable holds the requests in flight by their id's callKey: those
// with an integer key, the usual kind, in a map of their own, whose key
// hashes and compares as one word and holds no pointer. The zero
// callTable is empty.
type callTable struct {
	ints map[int64]*stdioCall
	strs map[string]*stdioCall
}

func (t *callTable) get(k callKey) *stdioCall {
	if k.s == "" {
		return t.ints[k.n]
	}
	return t.strs[k.s]
}

func (t *callTable) put(k callKey, c *stdioCall) {
	switch {
	case k.s != "":
		if t.strs == nil {
			t.strs = map[string]*stdioCall{}
		}
		t.strs[k.s] = c
	default:
		if t.ints == nil {
			t.ints = map[int64]*stdioCall{}
		}
		t.ints[k.n] = c
	}
}

func (t *callTable) del(k callKey) {
	if k.s == "" {
		delete(t.ints, k.n)
		return
	}
	delete(t.strs, k.s)
}

func (t *callTable) each(f func(*stdioCall)) {
	for _, c := range t.ints {
		f(c)
	}
	for _, c := range t.strs {
		f(c)
	}
}

// reply sends the call's response (nil: none is due).
func (c *stdioCall) reply(line []byte) {
	if c.batch != nil {
		c.batch.reply(c.Msg.ID, line)
		return
	}
	c.s.reply(line)
}

// ask is the call's Request.Ask: a server-to-client request that ends with
// the call.
func (c *stdioCall) ask(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	ctx, stop := within(ctx, c.ctx)
	defer stop()
	s := c.s
	return s.asks.call(ctx, method, params, s.Notify, func(m *jsonrpc.Message) { s.Notify(m) })
}

// serve serves the call on the goroutine it runs on and sends its
// response.
func (c *stdioCall) serve() {
	defer c.s.wg.Done()
	if req := c.prelude(); req != nil {
		c.respond(c.s.handle(c.ctx, req))
	}
}

// Complete is the response of a call the Handler's Starter serves
// (Completion); a second is ignored.
func (c *stdioCall) Complete(resp *jsonrpc.Message) {
	if c.completed.Swap(true) {
		return
	}
	c.respond(resp)
	c.s.wg.Done()
}

// prelude checks the call's request before it is served, and completes
// the Request the Handler sees; nil when the call was answered (refused)
// instead.
func (c *stdioCall) prelude() *Request {
	s, msg := c.s, c.Msg
	initialize := msg.Method == "initialize"
	if initialize && !s.initialized.CompareAndSwap(initNone, initRunning) {
		// As over HTTP: a session is initialized once; a second
		// initialize would change its version and capabilities under
		// the requests already made with them.
		c.finish(jsonrpc.Failure(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"initialize was already sent on this connection: send it once per connection; to start over, start a new connection")).Encode())
		return nil
	}
	meta := readMeta(msg.Params)
	if v := meta.version; v != "" && !protocol.Supported(v) && !initialize {
		// As over HTTP: a request that names a generation the
		// server does not speak is refused, with those it does.
		c.finish(jsonrpc.Failure(msg.ID, unsupportedVersion(msg.ID, v).err).Encode())
		return nil
	}
	if protocol.Modern(meta.version) && !initialize {
		if err := checkModernRequest(msg, meta); err != nil {
			c.finish(jsonrpc.Failure(msg.ID, err).Encode())
			return nil
		}
	}
	req := &c.Request
	req.Protocol = s.version(meta.version)
	req.ClientCapabilities = s.capabilities(req, meta)
	if usesRequests(req) {
		req.Ask = c.ask
	}
	return req
}

// respond sends the call's response (nil: none is due). The call ends
// (end) before its response is queued: a client may reuse the id the
// moment it reads the response.
func (c *stdioCall) respond(resp *jsonrpc.Message) {
	s, msg := c.s, c.Msg
	initialize := msg.Method == "initialize"
	if initialize {
		if resp != nil && resp.Error == nil {
			s.initialized.Store(initDone)
		} else {
			s.initialized.Store(initNone) // the client may try again
		}
	}
	if resp == nil {
		c.finish(nil)
		return
	}
	resp.ID = msg.ID
	if initialize && resp.Error == nil {
		if v := negotiated(resp.Result); v != "" {
			s.protocol.Store(&v)
		}
		// A copy: the session keeps it, and it would otherwise keep the
		// whole buffer the line was read into (jsonrpc.Reader.ReadOwned).
		caps := json.RawMessage(bytes.Clone(c.Request.ClientCapabilities))
		s.caps.Store(&caps)
		// Open before the answer goes out: a client may send its next
		// request the moment it reads it.
		s.openOnce.Do(func() { s.h.SessionOpened(s) })
	}
	if c.batch != nil {
		c.finish(resp.Encode())
		return
	}
	c.end()
	// Encoded into a buffer of the queue's, which takes it back once the
	// line is written.
	line := s.ob.line()
	line.b = resp.Append(line.b[:0])
	s.ob.pushLine(line)
}

// finish ends the call and sends its response (nil: none is due).
func (c *stdioCall) finish(line []byte) {
	c.end()
	c.reply(line)
}

// end takes the call out of the session's calls and ends its context.
func (c *stdioCall) end() {
	c.s.mu.Lock()
	c.s.calls.del(keyOf(c.msg.ID)) // read again: a call is smaller without it
	c.s.mu.Unlock()
	c.cancelCtx(nil) // answered: nothing is left for a watch to give up
}

// Where a stdio connection's initialize stands (stdioSession.initialized).
const (
	initNone int32 = iota
	initRunning
	initDone
)

// handle calls the Handler; a panic becomes an internal error response
// rather than the end of the process, as over HTTP.
func (s *stdioSession) handle(ctx context.Context, req *Request) (resp *jsonrpc.Message) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("the handler panicked", "method", clip(req.Msg.Method), "panic", v, "stack", string(debug.Stack()))
			resp = jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error while serving %s", clip(req.Msg.Method)))
		}
	}()
	return s.h.Handle(ctx, req)
}

// startCall offers the Handler's Starter the request of call, whose
// prelude was done, and reports whether it took it; a panic becomes an
// internal error response, as in handle.
func (s *stdioSession) startCall(call *stdioCall, req *Request) (took bool) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("the handler panicked", "method", clip(req.Msg.Method), "panic", v, "stack", string(debug.Stack()))
			call.Complete(jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error while serving %s", clip(req.Msg.Method))))
			took = true
		}
	}()
	return s.starter.Start(call.ctx, req, call)
}

// notified passes a notification to the Handler; a panic is logged, and
// the connection goes on.
func (s *stdioSession) notified(ctx context.Context, msg *jsonrpc.Message) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("the handler panicked on a notification", "method", clip(msg.Method), "panic", v, "stack", string(debug.Stack()))
		}
	}()
	s.h.Notified(ctx, s, msg)
}

// capabilities are the client capabilities a request carries: its own at
// initialize, its _meta ones (meta) when sessionless, else the session's.
func (s *stdioSession) capabilities(req *Request, meta requestMeta) json.RawMessage {
	switch {
	case req.Msg.Method == "initialize":
		return initCapabilities(req.Msg.Params)
	case protocol.Modern(req.Protocol):
		return meta.capabilities()
	}
	return s.ClientCapabilities()
}

// version is the protocol a request speaks: its own _meta version (the
// sessionless generation), else the one negotiated at initialize.
func (s *stdioSession) version(meta string) string {
	if meta != "" {
		return meta
	}
	if v := s.protocol.Load(); v != nil {
		return *v
	}
	return ""
}

func (s *stdioSession) cancel(params []byte) {
	id := cancelledID(params)
	if id == nil {
		return
	}
	s.mu.Lock()
	call := s.calls.get(keyOf(id))
	s.mu.Unlock()
	if call != nil {
		call.Cancel(cancelCause(params))
	}
}

func (s *stdioSession) cancelAll() {
	s.cancelWhere(func(*stdioCall) bool { return true })
}

func (s *stdioSession) cancelListens() {
	s.cancelWhere(func(call *stdioCall) bool { return call.msg.Method == "subscriptions/listen" })
}

// cancelWhere cancels the calls in flight that match, outside the lock: a
// call's cancellation may answer it at once (Request.OnCancel), and its
// answer takes the lock to end it.
func (s *stdioSession) cancelWhere(match func(*stdioCall) bool) {
	var calls []*stdioCall
	s.mu.Lock()
	s.calls.each(func(call *stdioCall) {
		if match(call) {
			calls = append(calls, call)
		}
	})
	s.mu.Unlock()
	for _, call := range calls {
		call.Cancel(nil)
	}
}

// idle waits until no request is in flight, up to limit.
func (s *stdioSession) idle(limit time.Duration) bool {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
		s.ob.flushWait(limit)
		return true
	case <-t.C:
		return false
	}
}

// lineQueue is one stream's ordered queue of outgoing messages with one
// writer. Responses are never dropped (their number is bounded by the
// caller's in-flight slots); other messages are dropped past the limit.
type lineQueue struct {
	mu      sync.Mutex
	queue   []queuedLine
	notes   int // droppable messages queued
	bytes   int // ... and their bytes (see maxQueuedBytes)
	limit   int
	dropped int
	closed  bool
	writing bool // a batch, or a response written at once, is being written
	wake    chan struct{}
	flushed chan struct{} // signalled each time the queue is found empty
	// gather, if set, says whether the writer, woken, should first let the
	// goroutines that are ready to run go (see drain); set before drain.
	gather func() bool
	// try, if set, writes what the client's pipe takes at once, without
	// waiting; a response that finds nothing queued and nothing being
	// written goes out through it from the goroutine that pushes it, and
	// done is told, as drain's is. Set before drain.
	try  func([]byte) (int, error)
	done func(responses int)
	// lines are buffers to encode messages into (see line), back once
	// written.
	lines sync.Pool
}

// lineBuf is a buffer of lineQueue.lines.
type lineBuf struct{ b []byte }

// maxPooledLine is the largest buffer kept for another line: a rare large
// answer's buffer is left to the collector rather than held.
const maxPooledLine = 64 << 10

// line returns a buffer to encode a message into, for pushLine or add.
func (o *lineQueue) line() *lineBuf {
	if l, ok := o.lines.Get().(*lineBuf); ok {
		return l
	}
	return &lineBuf{b: make([]byte, 0, 512)}
}

// release takes back a line's buffer once it is written.
func (o *lineQueue) release(l *lineBuf) {
	if l != nil && cap(l.b) <= maxPooledLine {
		l.b = l.b[:0]
		o.lines.Put(l)
	}
}

// tryWriter is an output that can write without waiting (internal/pipeio).
type tryWriter interface {
	Direct() bool
	TryWrite([]byte) (int, error)
}

type queuedLine struct {
	data     []byte
	buf      *lineBuf // data's buffer, to release once written; nil: data is not pooled
	response bool
	rest     bool // the rest of a line written in part: no newline to add
}

func newLineQueue(limit int) *lineQueue {
	return &lineQueue{limit: limit, wake: make(chan struct{}, 1), flushed: make(chan struct{}, 1)}
}

// push queues data; it never blocks.
func (o *lineQueue) push(data []byte, response bool) bool {
	return o.add(data, nil, response)
}

// pushLine queues a response encoded into a buffer of line's; it never
// blocks.
func (o *lineQueue) pushLine(l *lineBuf) {
	o.add(l.b, l, true)
}

// add queues data (in buf, if pooled).
func (o *lineQueue) add(data []byte, buf *lineBuf, response bool) bool {
	o.mu.Lock()
	if o.closed || (!response && (o.notes >= o.limit || (o.notes > 0 && o.bytes+len(data) > maxQueuedBytes))) {
		if !o.closed {
			o.dropped++
		}
		o.mu.Unlock()
		return false
	}
	if response && o.try != nil && !o.writing && len(o.queue) == 0 && !o.gather() {
		o.writeNow(data, buf)
		return true
	}
	o.queue = append(o.queue, queuedLine{data: data, buf: buf, response: response})
	if !response {
		o.notes++
		o.bytes += len(data)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// writeNow writes a response from the goroutine that pushed it, when it
// is the only one in flight and nothing is queued or being written: the
// writer would otherwise have to be woken and scheduled for it (stdio at
// one call in flight, as BenchmarkCall measures). What the pipe does not take at
// once is queued first in line, for the writer to wait on; so is the
// response when the write fails, and the writer reports why. Called with
// o.mu held; returns with it released.
func (o *lineQueue) writeNow(data []byte, buf *lineBuf) {
	o.writing = true
	o.mu.Unlock()
	line := append(data, '\n')
	if buf != nil {
		buf.b = line
	}
	n, _ := o.try(line)
	o.mu.Lock()
	o.writing = false
	if n == len(line) {
		wake := len(o.queue) > 0 || o.closed
		o.mu.Unlock()
		o.release(buf)
		o.done(1)
		if wake {
			o.signal()
		}
		return
	}
	o.queue = append(o.queue, queuedLine{})
	copy(o.queue[1:], o.queue)
	o.queue[0] = queuedLine{data: line[n:], buf: buf, response: true, rest: true}
	o.mu.Unlock()
	o.signal()
}

func (o *lineQueue) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *lineQueue) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// drain writes queued messages to w, one per line, until the lineQueue is
// closed and empty or a write fails. done is told, after each write, of
// the responses it put on the wire.
func (o *lineQueue) drain(w io.Writer, done func(responses int)) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var batch []queuedLine
	for {
		o.mu.Lock()
		if o.writing {
			// A response is being written at once (writeNow), which
			// signals when it is done.
			o.mu.Unlock()
			<-o.wake
			continue
		}
		batch, o.queue = o.queue, batch[:0]
		o.notes, o.bytes = 0, 0
		o.writing = len(batch) > 0
		closed := o.closed
		o.mu.Unlock()
		for _, m := range batch {
			bw.Write(m.data)
			if m.rest {
				continue
			}
			if err := bw.WriteByte('\n'); err != nil {
				return err
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		o.mu.Lock()
		o.writing = false
		o.mu.Unlock()
		// A response's slot frees once it is on the wire, not in a buffer.
		responses := 0
		for i, m := range batch {
			o.release(m.buf)
			if m.response {
				responses++
			}
			batch[i] = queuedLine{}
		}
		done(responses)
		if len(batch) == 0 {
			if closed {
				return nil
			}
			select {
			case o.flushed <- struct{}{}:
			default:
			}
			<-o.wake
			if o.gather != nil && o.gather() {
				// Let the goroutines that are ready to run go first:
				// with many requests in flight, those just woken by
				// their answers push them now, and they go out in this
				// write rather than one write(2), and one wake-up of
				// the client, each. With nothing else ready, this
				// returns at once.
				runtime.Gosched()
			}
		}
	}
}

// backedUp reports whether messages wait to be written, or a write is
// under way: with a client that reads, the queue is empty most of the time.
func (o *lineQueue) backedUp() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writing || len(o.queue) > 0
}

// flushWait waits until the writer found the queue empty, up to limit.
func (o *lineQueue) flushWait(limit time.Duration) {
	select {
	case <-o.flushed: // drop a stale signal
	default:
	}
	o.mu.Lock()
	empty := len(o.queue) == 0
	o.mu.Unlock()
	if empty {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-o.flushed:
	case <-t.C:
	}
}
