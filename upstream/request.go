package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Request is any request forwarded upstream; tools/call is one (CallTool
// builds it).
type Request struct {
	Method string
	// Params are forwarded byte for byte, except that with OnProgress and
	// ProgressToken set, _meta.progressToken is set to a token of the
	// instance's own (spliced in: the other bytes stay). Params that are not
	// a JSON object go out as they are, and then no progress is relayed.
	Params json.RawMessage
	// ProgressToken is the caller's token (raw JSON). With OnProgress set,
	// upstream progress notifications for this request are handed to
	// OnProgress with their progressToken replaced by this one. The upstream
	// sees a token unique to this request, so two callers that use the same
	// token never see each other's progress.
	ProgressToken json.RawMessage
	// OnProgress is called on the goroutine that reads the upstream, in the
	// order the notifications arrived. It must not block: every other
	// message of the instance waits while it runs, so a caller that cannot
	// deliver at once queues (or drops) the notification.
	OnProgress func(params json.RawMessage)
	// KeepProgress, with OnProgress and ProgressToken set, is called with
	// a successful result before Do returns. When it returns true, the
	// request's progress token stays registered past the response (the
	// token of a task-augmented request is valid for the task's lifetime):
	// OnProgress goes on receiving the token's notifications until the
	// caller calls release, which it must do once they are of no more use.
	// release may be called more than once, and after the instance ended.
	KeepProgress func(result json.RawMessage, release func()) bool
	// OnServerRequest answers the requests the upstream sends while this
	// request is in flight and that belong to it (sampling/createMessage,
	// elicitation/create, roots/list): see Instance.SetServerRequestHandler
	// for how a request of the upstream is attributed.
	OnServerRequest ServerRequestHandler
	// Principal is who the request is made for (the client's identity);
	// requests of different principals never answer each other's upstream
	// requests. The zero Principal is a principal of its own, shared with no
	// request.
	Principal identity.Principal
	// Meta are members set in params._meta (the trace context of the
	// aggregator's own span), spliced in as the progress token is; params
	// that are not a JSON object go out without them.
	Meta map[string]json.RawMessage
}

// ServerRequestHandler answers a request the upstream sent to the
// aggregator. It returns the raw result or a JSON-RPC error, which go back
// to the upstream unchanged (a nil result is sent as {}). ctx ends when the
// upstream withdraws the request (notifications/cancelled), when the
// request it was attributed to ends, or when the instance does.
type ServerRequestHandler func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)

// CodeUnattributed is the JSON-RPC error code an upstream gets for a request
// the aggregator cannot attribute to one downstream session.
const CodeUnattributed = jsonrpc.CodeInternalError

// flight is a Request in flight that answers its upstream's requests.
type flight struct {
	id        uint64          // in the order the flights began
	ctx       context.Context // its Caller, if any, is where its log messages go
	handler   ServerRequestHandler
	principal identity.Principal // Request.Principal
	// resultWait: the Request is a tasks/result, which waits on a task
	// and answers the upstream's requests about it.
	resultWait bool
	// asking counts the upstream's requests attributed to this flight and
	// not yet answered; guarded by flights.mu.
	asking int
}

// flights are the in-flight Requests of an instance that have an
// OnServerRequest, by flight id; every Do has an id, carried in its context
// so that a transport can tell on which request's stream a message came.
type flights struct {
	next atomic.Uint64
	mu   sync.Mutex
	// byID holds the flights by value, so that a call allocates none (a
	// value of up to 128 bytes is kept in the map itself).
	byID     map[uint64]flight
	fallback ServerRequestHandler
	// serving are the upstream's requests being answered, by id key, so
	// that the upstream's notifications/cancelled can end them.
	serving map[string]*serving
}

// serving is one request of the upstream being answered.
type serving struct {
	cancel    context.CancelFunc
	withdrawn bool // the upstream cancelled it: no answer is sent
}

type flightKey struct{}

// relatedTaskKey is the _meta key by which a request of the upstream names
// the task it is about.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// flightOf is the id of the Do whose context ctx is, or 0.
func flightOf(ctx context.Context) uint64 {
	id, _ := ctx.Value(flightKey{}).(uint64)
	return id
}

// begin gives a Do its flight id and, when it answers the upstream's
// requests, records it; end forgets it. tag carries the id in the returned
// context, for a transport that tells by it on which request's stream a
// message came (over HTTP); over stdio nothing reads it, and the context
// stays as it is.
func (f *flights) begin(ctx context.Context, method string, handler ServerRequestHandler, principal identity.Principal, tag bool) (context.Context, uint64) {
	id := f.next.Add(1)
	if tag {
		ctx = context.WithValue(ctx, flightKey{}, id)
	}
	// A flight with a handler is recorded without looking its Caller up
	// (a walk up ctx): only a log message on its stream reads it.
	if handler == nil && CallerOf(ctx) == nil {
		return ctx, id
	}
	f.mu.Lock()
	if f.byID == nil {
		f.byID = map[uint64]flight{}
	}
	f.byID[id] = flight{id: id, ctx: ctx, handler: handler, principal: principal, resultWait: method == "tasks/result"}
	f.mu.Unlock()
	return ctx, id
}

// end forgets flight id.
func (f *flights) end(id uint64) {
	f.mu.Lock()
	delete(f.byID, id)
	f.mu.Unlock()
}

// attribute picks who answers a request of the upstream that arrived on
// the stream of flight id (0: on no request's stream, or unknown):
//
//  1. the Request whose stream it arrived on, when it has a handler;
//  2. otherwise, unless it arrived on the stream of a Request without
//     one, a Request in flight with a handler, when all of those are of
//     one principal (see unlinked);
//  3. otherwise the instance's handler (SetServerRequestHandler);
//  4. otherwise no one (nil).
//
// The chosen Request, for 1 and 2, counts the request as asking until
// done is called; done is never nil.
func (f *flights) attribute(id uint64, namesTask bool) (handler ServerRequestHandler, flightCtx context.Context, done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.byID[id]
	switch {
	case id != 0 && ok && fl.handler != nil:
	case id == 0 && namesTask && f.fallback != nil:
		// A request about a task belongs to the task's owner: a tasks/result
		// waiting on it, else the instance's handler, which finds the owner
		// by the task. Never another call in flight: not even the one that
		// created the task, which the upstream has answered already (its
		// answer may just not have reached its caller yet), and which would
		// take the request down with it as it ends.
		fl, ok = f.unlinkedWhere(func(fl flight) bool { return fl.resultWait })
	case id == 0:
		fl, ok = f.unlinked()
	default:
		ok = false
	}
	if !ok {
		return f.fallback, nil, func() {}
	}
	fl.asking++
	f.byID[fl.id] = fl
	chosen := fl.id
	return fl.handler, fl.ctx, func() {
		f.mu.Lock()
		if fl, ok := f.byID[chosen]; ok { // not when its Do has ended
			fl.asking--
			f.byID[chosen] = fl
		}
		f.mu.Unlock()
	}
}

// unlinked picks the Request a request of the upstream that names none
// belongs to (over stdio, and on an HTTP server's GET stream, nothing
// says): the only Request in flight with a handler; or, when several are
// and all are of one principal, the oldest of them not already waiting for
// an answer to a request of the upstream (the oldest of all when every
// one is waiting). Whichever of that principal's calls asks, the answer
// comes from that principal and goes back to the upstream's request it
// answers. With several principals it is nil: any choice could hand one
// client's question, or answer, to another. Called with f.mu held.
func (f *flights) unlinked() (flight, bool) {
	return f.unlinkedWhere(nil)
}

// unlinkedWhere is unlinked among the flights that pass keep (nil: all).
// Called with f.mu held.
func (f *flights) unlinkedWhere(keep func(flight) bool) (flight, bool) {
	var oldest, idle flight // id 0: none yet (flight ids start at 1)
	for _, fl := range f.byID {
		if fl.handler == nil || (keep != nil && !keep(fl)) {
			continue
		}
		if oldest.id != 0 && (fl.principal != oldest.principal || fl.principal.IsZero()) {
			return flight{}, false
		}
		if oldest.id == 0 || fl.id < oldest.id {
			oldest = fl
		}
		if fl.asking == 0 && (idle.id == 0 || fl.id < idle.id) {
			idle = fl
		}
	}
	if idle.id != 0 {
		return idle, true
	}
	return oldest, oldest.id != 0
}

// askers counts the flights that answer the upstream's requests, and the
// principals they are of. Called with f.mu held.
func (f *flights) askers() (n, principals int) {
	seen := map[identity.Principal]bool{}
	for _, fl := range f.byID {
		if fl.handler != nil {
			n++
			if !seen[fl.principal] || fl.principal.IsZero() {
				principals++
			}
			seen[fl.principal] = true
		}
	}
	return n, principals
}

// Caller is the downstream request an upstream request serves, as far as
// the upstream's log messages go: the level to ask a sessionless upstream
// for, and where the messages it sends on the request's own response
// stream go (those belong to that request; the others, over stdio or on
// the GET stream, go to OnNotification).
type Caller interface {
	// LogLevel is the level (debug ... emergency) the caller wants log
	// messages at; "" asks for none.
	LogLevel() string
	// Log takes one log message (notifications/message params, raw). It
	// runs on the goroutine that reads the upstream and must not block.
	Log(inst *Instance, params json.RawMessage)
}

type callerKey struct{}

// WithCaller returns ctx whose upstream requests serve c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf is the caller ctx's upstream requests serve, or nil.
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// requestLog hands a log message that came on a request's response stream
// to that request's sink; false when it has none.
func (i *Instance) requestLog(flight uint64, params json.RawMessage) bool {
	if flight == 0 {
		return false
	}
	i.flights.mu.Lock()
	fl, ok := i.flights.byID[flight]
	i.flights.mu.Unlock()
	if !ok {
		return false
	}
	logs := CallerOf(fl.ctx)
	if logs == nil {
		return false
	}
	logs.Log(i, params)
	return true
}

// SetServerRequestHandler sets the handler for the upstream's requests that
// no in-flight Request claims. An upstream request is answered by, in turn:
// over HTTP, the Request on whose response stream it arrived; the only
// Request in flight with an OnServerRequest, or the oldest of them not
// already waiting on a request of the upstream when all are of one
// Principal (and the request did not arrive on another Request's stream);
// this handler; and
// otherwise an error (CodeUnattributed) saying it cannot be attributed to
// one downstream session. The proxy sets it on a leased instance to its
// session's handler. nil removes it. A request that names a task in its
// related-task _meta and arrived on no Request's stream goes to a
// tasks/result in flight, else to this handler when one is set, never to
// another Request: the task's owner is found by the task. ping is always answered by the
// aggregator itself.
func (i *Instance) SetServerRequestHandler(h ServerRequestHandler) {
	i.flights.mu.Lock()
	i.flights.fallback = h
	i.flights.mu.Unlock()
}

// Do forwards a request and returns the upstream's result as raw JSON. An
// upstream JSON-RPC error is returned as *RPCError, intact. ctx bounds the
// whole request, the write of it included: an upstream that does not read
// cannot hold the caller past its deadline, and when ctx ends after the
// request went out, the upstream is sent notifications/cancelled. A
// response over Options.MaxMessage fails the request at once (the error
// wraps *jsonrpc.TooLongError).
func (i *Instance) Do(ctx context.Context, r Request) (json.RawMessage, error) {
	if r.Method == "" {
		return nil, errors.New("upstream: a request needs a method")
	}
	params, progressKey := i.outgoing(ctx, r)
	if progressKey != 0 {
		defer func() {
			if progressKey != 0 {
				i.endProgress(progressKey)
			}
		}()
	}
	_, remote := i.conn.(*remoteConn)
	ctx, flight := i.flights.begin(ctx, r.Method, r.OnServerRequest, r.Principal, remote)
	defer i.flights.end(flight)
	var (
		raw json.RawMessage
		err error
	)
	if protocol.Modern(i.protocol) && (r.Method == "resources/subscribe" || r.Method == "resources/unsubscribe") {
		return i.subscription(ctx, r.Method, params)
	}
	switch sc, direct := i.conn.(*stdioConn); {
	case protocol.Modern(i.protocol) && multiRound(r.Method):
		raw, err = i.rounds(ctx, r, params)
	case direct:
		// The params as they are, not boxed in an interface (an allocation
		// per call); none at all rather than "params":null.
		raw, err = sc.callRaw(ctx, r.Method, params)
	case len(params) > 0:
		raw, err = i.conn.call(ctx, r.Method, params)
	default:
		raw, err = i.conn.call(ctx, r.Method, nil)
	}
	if err == nil {
		if err = i.notObject(r.Method, raw); err != nil {
			return nil, err
		}
	}
	if err == nil && progressKey != 0 && r.KeepProgress != nil {
		key := progressKey
		if r.KeepProgress(raw, func() { i.endProgress(key) }) {
			progressKey = 0 // the caller's now
		}
	}
	return raw, err
}

// notObject is the error of a result for method that is not a JSON
// object; nil for an object. Every MCP result is an object; what is not
// cannot be relayed as one, and a client would fail on it without naming
// the server.
func (i *Instance) notObject(method string, raw json.RawMessage) error {
	if isObject(raw) {
		return nil
	}
	return violation("server %q: its result for %s is %s, not a JSON object; the server does not follow the MCP schema, report it to its maintainers",
		i.server, method, jsonKind(raw))
}

// outgoing is r's params as they go to the upstream: with a progress
// token of the instance's own, registered under progressKey (0: none),
// when r relays progress, and with r's _meta members and the caller's log
// level of the 2026-07-28 generation spliced in.
func (i *Instance) outgoing(ctx context.Context, r Request) (params json.RawMessage, progressKey int64) {
	params = r.Params
	if r.OnProgress != nil && len(r.ProgressToken) > 0 {
		// Each request gets a token unique on this instance, so progress
		// from a shared upstream can never reach another session's request.
		key := i.nextToken.Add(1)
		var tokenBuf [32]byte
		if p, ok := withProgressToken(params, appendProgressToken(tokenBuf[:0], key)); ok {
			params = p
			sink := &progressSink{downstream: r.ProgressToken, onProgress: r.OnProgress}
			i.progMu.Lock()
			i.progress[key] = sink
			i.progMu.Unlock()
			progressKey = key
		}
	}
	if len(r.Meta) > 0 {
		if p, ok := withMeta(params, r.Meta); ok {
			params = p
		}
	}
	return i.modernParams(ctx, params), progressKey
}

// Notify sends the upstream a notification, its params byte for byte (nil
// sends none); for example notifications/roots/list_changed. ctx bounds the
// write. Cancellation is not a notification callers send: ending the
// context of a Do cancels its request upstream.
func (i *Instance) Notify(ctx context.Context, method string, params json.RawMessage) error {
	switch method {
	case "":
		return errors.New("upstream: a notification needs a method")
	case "notifications/cancelled", "notifications/initialized":
		return fmt.Errorf("upstream: %s is sent by the instance itself; end the request's context instead", method)
	}
	var p any
	if len(params) > 0 {
		p = params
	}
	return i.conn.notify(ctx, method, p)
}

// serverRequest answers a request of the upstream (a connection's
// requestHandler). It runs on a goroutine of its own, one of at most
// maxServerRequests; ctx ends with the connection. flight is the Do on
// whose stream it arrived, or 0.
func (i *Instance) serverRequest(ctx context.Context, req *jsonrpc.Message, flight uint64) *jsonrpc.Message {
	handler, flightCtx, done := i.flights.attribute(flight, rawjson.Mentions(req.Params, relatedTaskKey))
	defer done()
	if handler == nil {
		return jsonrpc.Failure(req.ID, i.unattributed(req.Method))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if flightCtx != nil {
		// The request belongs to that Do: once it is over, so is this.
		stop := context.AfterFunc(flightCtx, cancel)
		defer stop()
	}
	key := jsonrpc.IDKey(req.ID)
	s := &serving{cancel: cancel}
	i.flights.mu.Lock()
	if i.flights.serving == nil {
		i.flights.serving = map[string]*serving{}
	}
	i.flights.serving[key] = s
	i.flights.mu.Unlock()
	result, rpcErr := handler(ctx, req.Method, req.Params)
	i.flights.mu.Lock()
	if i.flights.serving[key] == s {
		delete(i.flights.serving, key)
	}
	withdrawn := s.withdrawn
	i.flights.mu.Unlock()
	switch {
	case withdrawn:
		return nil // the upstream asked for no answer
	case rpcErr != nil:
		return jsonrpc.Failure(req.ID, rpcErr)
	}
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	return &jsonrpc.Message{ID: req.ID, Result: result}
}

// withdrawn handles the upstream's notifications/cancelled: it ends the
// handler of the request it names, and no answer is sent. A cancellation
// that overtakes the start of its request's handler is lost; the upstream
// then gets an answer it ignores.
func (i *Instance) withdrawn(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || !jsonrpc.ValidID(p.RequestID) {
		return
	}
	i.flights.mu.Lock()
	s := i.flights.serving[jsonrpc.IDKey(p.RequestID)]
	if s != nil {
		s.withdrawn = true
	}
	i.flights.mu.Unlock()
	if s != nil {
		s.cancel()
	}
}

// isObject reports whether raw, valid JSON, is an object.
func isObject(raw json.RawMessage) bool {
	raw = trimLeftSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// trimLeftSpace is b without the JSON whitespace it starts with: what
// bytes.TrimLeft(b, " \t\r\n") returns, without building a set of the
// cutset's bytes each time (a call and an answer each come through here).
func trimLeftSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

// jsonKind names the kind of the JSON value raw, for an error text.
func jsonKind(raw json.RawMessage) string {
	raw = trimLeftSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	}
	return "a number"
}

// progressSink is where the progress notifications of one request go: the
// caller's callback, given the caller's own token.
type progressSink struct {
	gate       progressGate
	downstream json.RawMessage // the caller's token
	onProgress func(params json.RawMessage)
}

// deliver hands on a notification whose token is the request's.
func (s *progressSink) deliver(params json.RawMessage) {
	s.gate.pass(params, func() { s.onProgress(retoken(params, s.downstream)) })
}

// endProgress forgets the progress registration key; again is harmless.
func (i *Instance) endProgress(key int64) {
	i.progMu.Lock()
	delete(i.progress, key)
	i.progMu.Unlock()
}

// progressTokenPrefix starts every progress token the instance gives an
// upstream: "agg-" and a number, the key of its registration.
const progressTokenPrefix = "agg-"

// appendProgressToken appends the progress token of registration key, as
// JSON.
func appendProgressToken(b []byte, key int64) []byte {
	b = append(b, '"')
	b = append(b, progressTokenPrefix...)
	b = strconv.AppendInt(b, key, 10)
	return append(b, '"')
}

// progressKeyOf is the registration key a progress token (raw JSON, with
// or without whitespace around it) names, or false when it is not one
// appendProgressToken writes: a string of progressTokenPrefix and a number
// written as strconv writes it.
func progressKeyOf(raw []byte) (int64, bool) {
	raw = bytes.Trim(raw, " \t\r\n") // JSON's whitespace
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return 0, false
	}
	token := raw[1 : len(raw)-1]
	if bytes.IndexByte(token, '\\') >= 0 {
		// Written with escapes: what it means.
		s, ok := rawjson.String(raw)
		if !ok {
			return 0, false
		}
		token = []byte(s)
	}
	digits, ok := bytes.CutPrefix(token, []byte(progressTokenPrefix))
	if !ok || len(digits) == 0 || len(digits) > 18 || digits[0] == '0' {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// progressGate keeps a call's progress notifications increasing, as MCP
// requires of each one. An upstream may write them on more than one stream
// (an HTTP server may put some on its GET stream rather than the call's),
// and what arrives on different streams arrives in no set order; one whose
// progress is not above the last one passed on is out of date by then and
// is dropped rather than handed to a client as progress going backwards. A
// notification whose progress is not a number is passed on as it is.
type progressGate struct {
	mu   sync.Mutex
	last float64
	any  bool // one with a number was passed on
}

// pass calls deliver for a notification with params unless it is out of
// date. The gate is held while deliver runs, so that two streams' readers
// hand notifications on in the order the gate took them.
func (g *progressGate) pass(params json.RawMessage, deliver func()) {
	progress, isNumber := progressOf(params)
	g.mu.Lock()
	defer g.mu.Unlock()
	if isNumber {
		if g.any && progress <= g.last {
			return
		}
		g.last, g.any = progress, true
	}
	deliver()
}

// progressOf reads a progress notification's progress, when it is a number
// (a float64).
func progressOf(params json.RawMessage) (float64, bool) {
	raw := rawjson.Member(params, "progress")
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	progress, err := strconv.ParseFloat(string(raw), 64)
	return progress, err == nil
}
