package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// post is one POSTed message being served.
type post struct {
	w                     http.ResponseWriter
	r                     *http.Request
	msg                   *jsonrpc.Message
	acceptJSON, acceptSSE bool
	// fresh is the session an initialize creates, and opened whether it was
	// registered; opened is written on the Handle goroutine before the
	// response is handed over, and read after. from is what r's context
	// carries (carriedOf), once fromKnown. (The flags share a word, so
	// that the post, header included, fits in 896 bytes.)
	opened, fromKnown bool
	fresh             *httpSession
	from              carried
	// toBatch carries the requests to the client of a request in a batch
	// whose client accepts text/event-stream to the batch's stream (false:
	// the batch is over); nil for any other request.
	toBatch func(*jsonrpc.Message) bool

	// decoded is msg when the post's body is one message, decoded into
	// the post rather than an allocation of its own; a request of a batch
	// has its msg elsewhere.
	decoded jsonrpc.Message
	// detached is r's context without its cancellation, when the
	// connection ends the request (requestContext).
	detached detached

	// What serveRequest serves and writes the response with, made with the
	// post, in one allocation: the request handed to the Handler, the queue
	// of messages ahead of the response, the response, and the writer that
	// streams them while Handle runs.
	req  Request
	out  outbox
	rs   responseStream
	sw   streamWriter
	beat beat // its place among the requests awaiting a heartbeat (beats)
}

// carriedOf is what p's request's context carries, looked up once.
func (p *post) carriedOf() *carried {
	if !p.fromKnown {
		p.from, p.fromKnown = carriedBy(p.r), true
	}
	return &p.from
}

// servePost checks, reads and decodes a POSTed message and serves it in the
// generation it belongs to.
func (t *HTTP) servePost(w http.ResponseWriter, r *http.Request) {
	if !jsonContent(r) {
		t.refuse(w, r, refusal(http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest,
			"Content-Type must be application/json"))
		return
	}
	acceptJSON, acceptSSE := accepts(r)
	if !acceptJSON && !acceptSSE {
		t.refuse(w, r, refusal(http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest,
			"Accept admits neither application/json nor text/event-stream: list both, as MCP clients must"))
		return
	}
	if e := t.rateLimited(w, r); e != nil {
		t.refuse(w, r, e)
		return
	}
	from := carriedBy(r)
	body, e := t.readBody(w, r, from.conn)
	if e != nil {
		t.refuse(w, r, e)
		return
	}
	if isBatch(body) {
		t.postBatch(w, r, body, acceptJSON, acceptSSE)
		return
	}
	p := &post{w: w, r: r, acceptJSON: acceptJSON, acceptSSE: acceptSSE, from: from, fromKnown: true}
	if e := decodeMessage(&p.decoded, body); e != nil {
		t.refuse(w, r, e)
		return
	}
	msg := &p.decoded
	p.msg = msg

	// The generation is decided per message: 2026-07-28 and later, named in
	// the header or in _meta, is sessionless.
	if protocol.Modern(r.Header.Get(headerProtocol)) || protocol.Modern(metaVersion(msg.Params)) {
		t.postModern(p)
	} else {
		t.postSession(p)
	}
}

// rateLimited refuses, before its body is read, a request whose headers
// say it is a tools/call its principal must wait for (HTTPOptions.
// RateWait): 429 with Retry-After. The headers are checked against the
// body later (checkModernHeaders); a request without them is limited when
// the call is made.
func (t *HTTP) rateLimited(w http.ResponseWriter, r *http.Request) *httpError {
	if t.opts.RateWait == nil || r.Header.Get(headerMethod) != "tools/call" {
		return nil
	}
	tool := r.Header.Get(headerName)
	if tool == "" {
		return nil
	}
	wait := t.opts.RateWait(t.principalOf(r), tool)
	if wait <= 0 {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return refusal(http.StatusTooManyRequests, codeRateLimited, "rate limited: calls of %s are over this caller's rate limit; retry after %ds", clip(tool), secs)
}

// codeRateLimited is the JSON-RPC error code of a call over a rate limit,
// as the proxy answers it when the call is made.
const codeRateLimited = -32029

// decodeMessage decodes body, read for this message alone, into msg.
func decodeMessage(msg *jsonrpc.Message, body []byte) *httpError {
	if de := decodeClientInto(msg, body); de != nil {
		return &httpError{status: http.StatusBadRequest, id: de.ID, err: &jsonrpc.Error{Code: de.Code, Message: de.Reason}}
	}
	return nil
}

// postSession serves a message of the session-based generation.
func (t *HTTP) postSession(p *post) {
	msg := p.msg
	if msg.IsRequest() && msg.Method == "initialize" {
		t.initialize(p)
		return
	}
	s, e := t.sessionFrom(p.r, p.carriedOf())
	if e != nil {
		t.refuse(p.w, p.r, e.withID(msg.ID))
		return
	}
	switch {
	case msg.IsRequest():
		if msg.Method == "logging/setLevel" {
			t.reissue(p, s)
		}
		p.req = Request{Msg: msg, Session: s, Protocol: s.protocol, ClientCapabilities: s.caps}
		t.serveRequest(p, &p.req, s, nil)
	case msg.IsResponse():
		// It completes a request the server sent; nothing else hears of it.
		if !s.answer(msg) {
			t.log.Info("dropped a client response that no request awaits", "session", s.logID(), "id", clip(string(msg.ID)))
		}
		p.w.WriteHeader(http.StatusAccepted)
	case msg.Method == "notifications/cancelled":
		// Applied here, not passed on: it cancels the request's context.
		if id := cancelledID(msg.Params); jsonrpc.ValidID(id) {
			s.cancelRequest(keyOf(id), msg.Params)
		}
		p.w.WriteHeader(http.StatusAccepted)
	default: // another notification
		if !s.begin() {
			t.refuse(p.w, p.r, sessionGone())
			return
		}
		defer s.end()
		t.h.Notified(s.ctx, s, msg)
		p.w.WriteHeader(http.StatusAccepted)
	}
}

// initialize serves the request that opens a session. The session exists
// for the Handler from the start (Request.Session); it is registered, and
// its id becomes valid, only when the Handler answers with a result.
func (t *HTTP) initialize(p *post) {
	if t.Draining() {
		t.refuseDraining(p, "new sessions")
		return
	}
	if id := p.r.Header.Get(headerSessionID); id != "" {
		e := sessionGone()
		if s := t.lookup(id); s != nil && s.checkCaller(p.carriedOf()) == nil { // another client's looks unknown
			e = refusal(http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
				"this session is already initialized: send initialize without Mcp-Session-Id to start another")
		}
		t.refuse(p.w, p.r, e.withID(p.msg.ID))
		return
	}
	if n := t.Sessions(); n >= t.opts.MaxSessions {
		t.log.Warn("refused a new session: the gateway holds its maximum of open sessions", "sessions", n, "max", t.opts.MaxSessions)
		p.w.Header().Set("Retry-After", "10")
		t.refuse(p.w, p.r, refusal(http.StatusServiceUnavailable, jsonrpc.CodeInternalError,
			"the gateway holds its maximum of %d open sessions; try again shortly (clients end sessions with DELETE, idle ones end after --session-idle-ttl; an operator can raise --max-sessions)",
			t.opts.MaxSessions).withID(p.msg.ID))
		return
	}
	from := p.carriedOf()
	principal := t.principalFrom(p.r, from.caller)
	holder := holderOf(principal)
	if err := t.perClient.Take(holder); err != nil {
		t.log.Warn("refused a new session: the client holds its maximum of open sessions", "client", clip(holder), "max", t.opts.MaxSessionsPerClient)
		p.w.Header().Set("Retry-After", "10")
		t.refuse(p.w, p.r, refusal(http.StatusTooManyRequests, jsonrpc.CodeInternalError, "%s", err).withID(p.msg.ID))
		return
	}
	s := t.newSession()
	s.principal, s.holder = principal, holder
	s.caller = from.caller
	s.caller.Principal = principal
	s.caller.Token = identity.Secret{} // a token lives no longer than its request
	s.view = from.view
	// The place is the session's once it is registered (endSession gives
	// it back); an initialize that opens nothing gives it back here.
	defer func() {
		if !p.opened {
			t.perClient.Give(holder)
		}
	}()
	requested, _ := stringMember(members(p.msg.Params), "protocolVersion")
	s.caps = initCapabilities(p.msg.Params)
	t.sealID(s, negotiatedVersion(requested), present(members(p.msg.Params)["clientInfo"]))
	p.fresh = s
	// Set now, as the response may stream before Handle returns; removed
	// from a JSON answer if the session does not open.
	p.w.Header().Set(headerSessionID, s.id)

	opened := func(ctx context.Context, resp *jsonrpc.Message) *jsonrpc.Message {
		if resp != nil && resp.Error == nil && ctx.Err() == nil {
			s.protocol = negotiated(resp.Result)
			if s.protocol == "" {
				s.protocol = requested
			}
			if t.register(s) {
				t.h.SessionOpened(s)
				p.opened = true
				t.log.Info("session opened", "session", s.logID(), "protocol", s.protocol)
				return resp
			}
			resp = jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError,
				"the server is shutting down; reconnect once it is back"))
		}
		s.cancel(errResponseEnded) // never registered: release its context
		return resp
	}
	p.req = Request{Msg: p.msg, Session: s, Protocol: requested, ClientCapabilities: s.caps}
	t.serveRequest(p, &p.req, s, opened)
}

// serveRequest runs Handle on the request's own goroutine and writes what
// it sends and then its response; after, when set, sees the response before
// it is written.
//
// Concurrency: most requests send nothing before their response, so the
// goroutine that serves the request writes the response itself, with no
// hand-off. A writer goroutine starts only when the first message is queued
// for the stream, or when a heartbeat is due on a stream that may carry
// events; it writes until Handle returns and then leaves the rest to this
// goroutine, which waits for it first. So one goroutine at a time writes.
func (t *HTTP) serveRequest(p *post, req *Request, s *httpSession, after func(context.Context, *jsonrpc.Message) *jsonrpc.Message) {
	if req.Msg.Method != "subscriptions/listen" { // a listener waits; it is not work in flight
		t.activity.begin()
		defer func() { t.activity.end(time.Now()) }()
	}
	// The request's context ends when the client leaves or cancels, when its
	// session ends, at Shutdown, or once its response is finished. A request
	// of an open session is ended with it by endSession (cancelRequests),
	// which Shutdown runs for every open session; a sessionless request,
	// and an initialize, whose session is not registered yet, watch the
	// transport's or their session's context instead.
	ctx, cancel, watching := t.requestContext(p)
	if watching != nil {
		defer watching.unwatch()
	}
	defer cancel(errResponseEnded)
	if s == nil || p.fresh != nil {
		base := t.ctx
		if s != nil {
			base = s.ctx
		}
		stop := context.AfterFunc(base, func() { cancel(context.Cause(base)) })
		defer stop()
	}

	var key callKey // the request's in its session
	if s != nil {
		var e *httpError
		if key, e = s.beginRequest(req.Msg.ID, cancel); e != nil {
			t.refuse(p.w, p.r, e.withID(req.Msg.ID))
			return
		}
	}
	from := p.carriedOf()
	if s != nil {
		req.Principal, req.Holder = s.principal, s.holder // a session's own client: sessionOf checked it
	} else {
		req.Principal = t.principalFrom(p.r, from.caller)
		req.Holder = holderOf(req.Principal)
	}
	req.View = from.view
	if c := from.caller; c.Principal.Authenticated() {
		// The credentials of this request: a session's own principal's
		// (sessionOf checked it), its client and claims as fresh as the token.
		req.Client, req.Claims = c.Client, c.Claims
	}
	req.Cancel = cancel
	out, rs := &p.out, &p.rs
	out.limit = t.opts.QueueSize
	rs.init(p.w, t.opts.WriteTimeout)
	rs.conn = from.conn
	defer rs.finish()
	req.Send = func(*jsonrpc.Message) bool { return false }
	var w *streamWriter
	if p.acceptSSE {
		w = &p.sw
		w.rs, w.out, w.heartbeat, w.cancel, w.log, w.method = rs, out, t.opts.Heartbeat, cancel, t.log, req.Msg.Method
		out.writer = w
		req.Send = out.offer
		t.beats.add(&p.beat, w) // a stream once it runs a heartbeat interval
		defer t.beats.remove(&p.beat)
		defer w.finish() // also when a panic ends the request
	}
	if s != nil && usesRequests(req) {
		req.Ask = t.ask(ctx, p, s, out)
	}
	if tp := p.r.Header["Traceparent"]; len(tp) > 0 { // W3C trace context; the canonical key, looked up once
		req.TraceParent, req.TraceState = tp[0], p.r.Header.Get("Tracestate")
	}

	resp := t.serve(ctx, req, s, key, after)
	if w != nil && !w.finish() {
		return // a write failed: the stream is broken
	}
	t.respond(ctx, p, rs, out, req, resp)
}

// requestContext is the context of p's request: its HTTP request's, with a
// cancel of its own. It ends when the client leaves: the server ends the
// HTTP request's context then, and with it a context derived from it. On
// a connection of Serve over HTTP/1.x, where the connection itself finds
// the client gone (countedConn.Read), a request whose HTTP context ends
// only as the one net/http made ends (countedConn.endsAsServed) has a
// context derived from the HTTP request's values alone, which the
// connection ends, until the caller calls unwatch on the connection
// returned: a child of the HTTP request's context costs that context a map
// of its children and a channel, made anew for every request. A handler in
// front that narrows the context (a cancel or deadline of its own) gets
// the child. The requests of a batch, served together, derive theirs from
// the batch's, which ends them with it.
func (t *HTTP) requestContext(p *post) (context.Context, context.CancelCauseFunc, *countedConn) {
	conn := p.carriedOf().conn
	parent := p.r.Context()
	if _, batched := p.w.(*bufferedResponse); batched || conn == nil || !conn.endsAsServed(parent) {
		ctx, cancel := context.WithCancelCause(parent)
		return ctx, cancel, nil
	}
	p.detached = detached{parent}
	ctx, cancel := context.WithCancelCause(&p.detached)
	if !conn.watch(cancel) {
		cancel(context.Canceled) // the client left already
		return ctx, cancel, nil
	}
	if parent.Err() != nil {
		cancel(context.Canceled)
	}
	return ctx, cancel, conn
}

// detached is a context with the values of the one it holds and none of
// its cancellation or deadline, as context.WithoutCancel's, made with the
// post rather than allocated: it is only ever the parent of a request's
// cancellable context (requestContext), which the context package asks
// for its Done alone, and finds nil.
type detached struct{ context.Context }

func (*detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*detached) Done() <-chan struct{}       { return nil }
func (*detached) Err() error                  { return nil }

// serve runs Handle, then after, and ends the request, key in its session,
// whatever happens.
func (t *HTTP) serve(ctx context.Context, req *Request, s *httpSession, key callKey, after func(context.Context, *jsonrpc.Message) *jsonrpc.Message) *jsonrpc.Message {
	if s != nil {
		defer s.endRequest(key)
	}
	resp := t.handle(ctx, req)
	if after != nil {
		resp = after(ctx, resp)
	}
	return resp
}

// streamWriter writes a response's queued messages and heartbeats while
// Handle runs, on a goroutine of its own started on demand.
type streamWriter struct {
	rs        *responseStream
	out       *outbox
	heartbeat time.Duration
	// cancel ends the request when a write failed; log and method say so.
	cancel context.CancelCauseFunc
	log    *slog.Logger
	method string

	once  sync.Once
	ended sync.Once   // handled is closed
	ran   atomic.Bool // the goroutine was started
	// handled is closed when Handle returned, exited when the goroutine is
	// done writing; both are made when it starts (most requests write
	// their response alone and never start it).
	handled chan struct{}
	exited  chan struct{}
	failed  bool // a write failed; read after exited
}

// start starts the writer once; beat says a heartbeat is due now.
func (w *streamWriter) start(beat bool) {
	w.once.Do(func() {
		w.handled, w.exited = make(chan struct{}), make(chan struct{})
		w.out.wakeWriter()
		w.ran.Store(true)
		go w.run(beat)
	})
}

// fail ends the request whose response could not be written.
func (w *streamWriter) fail(err error) {
	w.out.close()
	w.cancel(errWriteFailed)
	w.log.Debug("a response could not be written", "method", clip(w.method), "err", err)
}

func (w *streamWriter) run(beat bool) {
	defer close(w.exited)
	tick := time.NewTicker(w.heartbeat)
	defer tick.Stop()
	for {
		var err error
		switch {
		case beat:
			beat = false
			err = w.rs.heartbeat()
		default:
			select {
			case <-w.out.wake:
				for m := w.out.take(); m != nil; m = w.out.take() {
					if err = w.rs.event(m); err != nil {
						break
					}
				}
			case <-tick.C:
				err = w.rs.heartbeat()
			case <-w.handled:
				return // the rest is the request goroutine's
			}
		}
		if err != nil {
			w.failed = true
			w.fail(err)
			return
		}
	}
}

// finish tells the writer Handle returned and waits until it stopped
// writing; false if a write failed. Once it returns, no writer goroutine can
// start, so the request goroutine writes alone. Calling it again only
// reports again.
func (w *streamWriter) finish() bool {
	w.once.Do(func() {}) // nothing starts the writer from now on
	if !w.ran.Load() {
		return true
	}
	w.ended.Do(func() { close(w.handled) })
	<-w.exited
	return !w.failed
}

// ask is Request.Ask of a POSTed request. The spec (2025-11-25, streamable
// HTTP): the server MAY send requests related to the client's request on
// its stream before the response, while the GET stream carries what is
// unrelated to any request. So the request goes on the POST's stream (the
// response switches to SSE with it), or, for a client that does not accept
// SSE there, on the GET stream; never on both. The answer comes as a POST
// of its own, matched by id in the session.
func (t *HTTP) ask(life context.Context, p *post, s *httpSession, out *outbox) func(context.Context, string, json.RawMessage) (*jsonrpc.Message, error) {
	// One function made per request, whether or not the request asks the
	// client anything; where its messages go is worked out when it does.
	return func(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
		send := s.Notify
		switch {
		case p.toBatch != nil:
			send = p.toBatch
		case p.acceptSSE:
			send = out.offer
		}
		// A notice for a request given up on follows it on its stream, or, once
		// that stream ended (the response is written), goes on the GET stream.
		cancelled := func(m *jsonrpc.Message) {
			switch {
			case p.toBatch != nil:
				if !p.toBatch(m) {
					s.Notify(m)
				}
			case !p.acceptSSE || !out.offer(m):
				s.Notify(m)
			}
		}
		ctx, stop := within(ctx, life)
		defer stop()
		return s.asks.call(ctx, method, params, send, cancelled)
	}
}

// handle calls the Handler; a panic becomes an internal error response
// rather than the end of the process.
func (t *HTTP) handle(ctx context.Context, req *Request) (resp *jsonrpc.Message) {
	defer func() {
		if v := recover(); v != nil {
			t.log.Error("the handler panicked", "method", clip(req.Msg.Method), "panic", v, "stack", string(debug.Stack()))
			resp = jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error while serving %s", req.Msg.Method))
		}
	}()
	return t.h.Handle(ctx, req)
}

// respond writes what is still queued and then the response: the last SSE
// event once the response streams, else one JSON body. Without a response
// the stream just ends; if nothing was written the reply is 202, or, when
// the request was cut short, what cut it short.
func (t *HTTP) respond(ctx context.Context, p *post, rs *responseStream, out *outbox, req *Request, resp *jsonrpc.Message) {
	out.close()
	for m := out.take(); m != nil; m = out.take() {
		if rs.event(m) != nil {
			return
		}
	}
	if resp == nil {
		if !rs.started {
			t.noResponse(p, rs, req, context.Cause(ctx))
		}
		return
	}
	answer := *resp // the Handler's message may be shared; the id is this request's
	answer.ID = req.Msg.ID
	if rs.sse || !p.acceptJSON {
		_ = rs.event(&answer)
		return
	}
	if p.fresh != nil && !p.opened {
		p.w.Header().Del(headerSessionID)
	}
	_ = rs.json(statusOf(req, &answer), &answer)
}

// noResponse answers a request that got no response before anything was
// written, according to why its context ended (nil: it did not).
func (t *HTTP) noResponse(p *post, rs *responseStream, req *Request, cause error) {
	if p.fresh != nil {
		p.w.Header().Del(headerSessionID)
	}
	switch {
	case cause == nil || errors.Is(cause, errCancelled):
		rs.status(http.StatusAccepted)
	case errors.Is(cause, errSessionEnded):
		t.refuse(p.w, p.r, sessionGone().withID(req.Msg.ID))
	case errors.Is(cause, errShutdown):
		t.refuse(p.w, p.r, (&httpError{status: http.StatusServiceUnavailable,
			err: jsonrpc.Errorf(jsonrpc.CodeInternalError, "the server is shutting down; send the request again once it is back")}).withID(req.Msg.ID))
	} // else the client is gone, or the response could not be written
}

// statusOf is the HTTP status of a JSON response. Protocol 2026-07-28 maps
// some errors onto HTTP statuses so that intermediaries can act on them.
func statusOf(req *Request, resp *jsonrpc.Message) int {
	if req.Session != nil || resp.Error == nil {
		return http.StatusOK
	}
	switch resp.Error.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case codeHeaderMismatch, codeMissingCapability, codeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// withID returns a copy of e answering the request with id.
func (e *httpError) withID(id json.RawMessage) *httpError {
	c := *e
	c.id = id
	return &c
}

// members returns the members of a JSON object (nil for anything else).
// Keys match exactly, as the dispatcher reads them.
func members(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// stringMember returns the member key of m when it is a JSON string.
func stringMember(m map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := m[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}
