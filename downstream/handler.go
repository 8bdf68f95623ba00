package downstream

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// Well-known _meta keys of protocol 2026-07-28.
const (
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	MetaLogLevel       = "io.modelcontextprotocol/logLevel"
)

// Session is one downstream client connection: the stdio connection, or
// one HTTP session of the session-based generation. Sessionless requests
// have none.
type Session interface {
	// Key identifies the session for as long as the process runs; it is
	// never reused.
	Key() string
	// Notify queues a message for the client on the session's own stream
	// (stdout; the HTTP GET stream). It never blocks: when the session is
	// gone, has no stream open, or its queue is full, the message is dropped
	// and Notify reports false.
	Notify(msg *jsonrpc.Message) bool
	// ClientCapabilities is the capabilities object the client declared at
	// initialize, raw (nil before).
	ClientCapabilities() json.RawMessage
	// Request sends a server-to-client request (sampling/createMessage,
	// elicitation/create, roots/list) on the session's own stream (stdout;
	// the HTTP GET stream) and waits for the client's response, bounded by
	// ctx. The response comes back as the client sent it, result or
	// JSON-RPC error; its id is the transport's (unique in the session).
	// Request fails at once when the session has no stream to carry it
	// (ErrNoStream: HTTP without an open GET stream, stdio without a
	// session-based initialize), has MaxPendingRequests awaiting an answer
	// (ErrTooManyRequests), or is gone (ErrSessionGone, also when it ends
	// while waiting). When ctx ends first, the client is sent
	// notifications/cancelled for the request and ctx's error is returned.
	Request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error)
	// Principal is who opened the session: the authenticated client (an
	// http.auth token's key, an OAuth client), else the address it came
	// from where the transport tells clients apart by address, else the
	// local user (stdio, loopback without authentication). It never
	// changes: later requests of the session come from the same principal.
	Principal() identity.Principal
}

// CallerSession is implemented by a Session that knows the client and
// claims of the credentials it was opened with (identity.Caller).
type CallerSession interface {
	Caller() identity.Caller
	// View is the view the session was opened at (/mcp/<view>); "" for
	// /mcp itself.
	View() string
}

// Attached is implemented by a Session whose client may be gone without
// having ended it (an HTTP session left without DELETE): Attached reports
// whether the client is there now, with a request being served or a
// stream open. A Session without it is there until it ends.
type Attached interface {
	Attached() bool
}

// Request is one client request being served.
type Request struct {
	Msg *jsonrpc.Message
	// Session is nil for a sessionless (2026-07-28) request.
	Session Session
	// Protocol is the version the request speaks: the one negotiated at
	// initialize, or the request's own _meta version when sessionless.
	Protocol string
	// Send queues a message that belongs to this request (progress, a
	// listen stream's notifications) on the request's own stream, ahead of
	// its response. It never blocks; when the stream cannot take it (the
	// client does not accept a stream, is gone, or its queue is full) the
	// message is dropped and Send reports false. Safe from any goroutine.
	Send func(*jsonrpc.Message) bool
	// Ask sends a server-to-client request tied to this request on the
	// request's own stream (HTTP: the POST's response, which becomes an SSE
	// stream if it was not one, or the session's GET stream when the client
	// does not accept SSE; stdio: the connection) and waits for the
	// response, as Session.Request does. It is bounded by ctx and by the
	// request itself: once the request is cancelled or answered, Ask ends.
	// Ask is nil when the request's generation has no server-to-client
	// requests (sessionless 2026-07-28, which uses input_required results;
	// initialize itself): callers then fall back or fail.
	Ask func(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error)
	// ClientCapabilities are the client's capabilities, raw: those of the
	// initialize request itself, the session's, or for a sessionless
	// request its _meta io.modelcontextprotocol/clientCapabilities. nil when
	// none were declared.
	ClientCapabilities json.RawMessage
	// Principal is who the request comes from (see Session.Principal):
	// the authenticated client, else its address where the transport tells
	// clients apart by address, else the local user. The zero Principal
	// only for requests made outside a transport.
	Principal identity.Principal
	// Client and Claims are what the request's credentials said beside its
	// principal (identity.Caller): the OAuth client (client_id, else azp)
	// or static token's name, and an access token's verified claims,
	// read-only. "" and nil without authentication.
	Client string
	Claims map[string]any
	// View is the view the request came to (/mcp/<view>, WithView); ""
	// for /mcp itself. A session's requests all come to its own view.
	View string
	// Profile is the key the Handler chooses the request's profile by,
	// which it sets on arrival from the principal, client and claims.
	Profile string
	// Holder is who the request's sessions, tasks and leases count against
	// for the per-client shares (fairshare.Of): the authenticated client,
	// else the address that opened its session or sent it (with
	// HTTPOptions.ClientsByAddress); "" where no share applies (stdio).
	Holder string
	// TraceParent and TraceState are the W3C trace context headers of the
	// HTTP request that carried the message ("" on stdio, or when absent):
	// a tracing handler's fallback when _meta carries no traceparent.
	TraceParent, TraceState string
	// ParamHeader looks up a header of the HTTP request that carried a
	// sessionless (2026-07-28) request, for the Mcp-Param-* headers its
	// tool's schema asks to mirror arguments into; nil for any other
	// request.
	ParamHeader func(name string) (value string, present bool)
	// Cancel ends the context Handle was given, with cause, as the client's
	// cancellation would; the response Handle then returns is still sent.
	// A handler uses it to bound its work (a call's timeout) without a
	// context of its own. Nil for requests made outside a transport.
	Cancel context.CancelCauseFunc

	// watch, when the transport has one, tells of the request's
	// cancellation (OnCancel).
	watch *cancelWatch
}

// Canceler is told that a request was cancelled (Request.OnCancel).
type Canceler interface {
	Cancel(cause error)
}

// OnCancel has c told, once, when the request is cancelled (Cancel, the
// client's cancellation, the end of its session), with the cause its
// context then gives; at once, when it was cancelled already. It reports
// false, having done nothing, when the request's transport does not tell:
// the caller then watches the request's context. What c.Cancel does must
// not block. A Starter uses it to give up a request without watching its
// context (context.AfterFunc costs a call five allocations).
func (r *Request) OnCancel(c Canceler) bool {
	if r.watch == nil {
		return false
	}
	r.watch.add(c)
	return true
}

// cancelWatch is who is told of a request's cancellation, and whether it
// came.
type cancelWatch struct {
	mu        sync.Mutex
	c         Canceler
	cancelled bool
	cause     error
}

func (w *cancelWatch) add(c Canceler) {
	w.mu.Lock()
	if w.cancelled {
		w.mu.Unlock()
		c.Cancel(w.cause)
		return
	}
	w.c = c
	w.mu.Unlock()
}

// cancel tells the watcher, once, that the request was cancelled with
// cause.
func (w *cancelWatch) cancel(cause error) {
	w.mu.Lock()
	if w.cancelled {
		w.mu.Unlock()
		return
	}
	c := w.c
	w.cancelled, w.cause, w.c = true, cause, nil
	w.mu.Unlock()
	if c != nil {
		c.Cancel(cause)
	}
}

// Sessionless reports whether the request belongs to no session: it speaks
// the sessionless generation (2026-07-28), over stdio too, where Session is
// the connection it came on and still no session of the request's, or it
// came with no session at all. This is the one place that question is
// answered; leases, log levels and subscriptions all ask here.
func (r *Request) Sessionless() bool {
	return r.Session == nil || protocol.Modern(r.Protocol)
}

// Meta returns the request's params._meta members (nil when there are none).
func (r *Request) Meta() map[string]json.RawMessage {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(r.Msg.Params) == 0 || json.Unmarshal(r.Msg.Params, &p) != nil {
		return nil
	}
	return p.Meta
}

// Handler serves what the transports receive. Every method may be called
// from many goroutines at once.
type Handler interface {
	// Handle answers one request and returns its response (result or
	// error; the transport sets the id). It returns nil when no response is
	// due: the client cancelled the request or went away, which ctx tells.
	Handle(ctx context.Context, req *Request) *jsonrpc.Message
	// Notified receives a client notification other than
	// notifications/cancelled, which the transport applies itself by
	// cancelling the request's ctx. Responses of the client never arrive
	// here: they complete Session.Request or Request.Ask, or are dropped
	// when nothing awaits them. sess is nil for sessionless messages.
	Notified(ctx context.Context, sess Session, msg *jsonrpc.Message)
	// SessionOpened tells that a session began: a successful initialize
	// (HTTP, or the first on a stdio connection). SessionClosed tells that
	// it ended (stdio end of input, HTTP DELETE, idle expiry, shutdown);
	// the stdio connection's session is closed even if it never opened, as
	// sessionless requests on it may have used it. Nothing arrives for a
	// session after SessionClosed.
	SessionOpened(Session)
	SessionClosed(Session)
}

// Starter is implemented by a Handler that can serve some requests
// without a goroutine waiting on each: the stdio transport offers it each
// request on the goroutine that read it, which reads on as soon as Start
// returns.
type Starter interface {
	// Start begins serving req as Handle would and returns true; the
	// response (nil when none is due, as Handle's) goes to done once, from
	// whichever goroutine has it, possibly before Start returns. Start
	// returns false, having done nothing, for a request it leaves to
	// Handle. It must not block: whatever may wait goes on a goroutine of
	// its own.
	Start(ctx context.Context, req *Request, done Completion) bool
}

// Completion takes the response of a request a Starter serves. Complete
// must not block, and is called once. The response is lent: what it holds
// (its result may still be in the buffer an upstream's answer was read
// into) is valid until Complete returns, so a transport encodes it there.
type Completion interface {
	Complete(resp *jsonrpc.Message)
}

// Caller is who req comes from, with its client and claims.
func (req *Request) Caller() identity.Caller {
	return identity.Caller{Principal: req.Principal, Client: req.Client, Claims: req.Claims}
}
