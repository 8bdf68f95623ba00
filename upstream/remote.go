package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/credential"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
	"github.com/mcp-aggregator/mcp-aggregator/internal/throttle"
)

// remoteConn is the one client transport to a remote upstream: streamable
// HTTP, or the legacy HTTP+SSE transport. Every message goes out and comes
// in raw (internal/jsonrpc), over requests the aggregator builds itself:
//
//   - a request is a POST, answered by a JSON body or an event stream that
//     carries its response, and may carry notifications and requests of
//     the upstream before it (exchange, remote_call.go); a legacy SSE
//     upstream answers on its one stream instead;
//   - a notification, or the answer to a request of the upstream, is a POST
//     of its own (post);
//   - a streamable-HTTP upstream's session (Mcp-Session-Id) and protocol
//     version (MCP-Protocol-Version) go with every request (setHeaders);
//     what it sends outside any request comes on a GET stream, opened again
//     when it ends, from the last event seen (listen, remote_stream.go); a
//     DELETE ends the session when the connection closes;
//   - a legacy SSE upstream's one stream names the endpoint its messages
//     are POSTed to, and carries everything it sends (readSSE).
//
// Event streams are read by the bounded reader of sse.go, and bodies are
// bounded too: an upstream never makes the aggregator hold more than
// maxMessage bytes of one message.
//
// Concurrency rules: notifications are handed on the goroutine that reads
// their stream, so the handler must not block (Instance.notified does not);
// each request of the upstream is answered on a goroutine of its own, at
// most maxServerRequests at once, and what is beyond is dropped at once.
// Every HTTP exchange is bounded by its caller's ctx or, for what the
// aggregator sends on its own, by noticeTimeout, and ends when the
// connection does; close ends every stream.
type remoteConn struct {
	scrub      func(string) string // see remoteOptions.scrub
	server     string
	url        string
	target     *url.URL // url, parsed
	client     *http.Client
	log        *slog.Logger
	maxMessage int
	onNotify   func(Notification)
	onRequest  requestHandler
	protocol   atomic.Pointer[string]
	// envelope is set for a sessionless (2026-07-28) upstream.
	envelope atomic.Pointer[envelope]
	// paramTools are the input schemas of the upstream's tools that mark
	// parameters for Mcp-Param-* headers, by tool name, as last listed.
	paramTools atomic.Pointer[map[string]json.RawMessage]
	// session is the Mcp-Session-Id of a streamable-HTTP upstream, "" for
	// none.
	session   atomic.Pointer[string]
	life      context.Context // ends when the connection does
	end       context.CancelFunc
	nextID    atomic.Int64
	requests  slots // requests of the upstream being handled
	notices   slots // cancellation notices under way
	dropped   throttledLog
	closed    chan struct{}
	closeOnce sync.Once
	failure   error // set before closed is closed
	// listenOnce starts the GET stream of a streamable-HTTP upstream once
	// its protocol is known; streamFailed and streamOversized throttle what
	// is logged about that stream, which is opened again every second while
	// it fails.
	listenOnce      sync.Once
	streamAnswered  chan struct{} // closed once the first GET stream request has its answer (any status) or failed
	streamOnce      sync.Once
	streamFailed    throttledLog
	streamOversized throttledLog

	// sse is set for a legacy SSE upstream: endpoint is where its messages
	// go, named by its stream, and pending are its requests awaiting their
	// responses on that stream, by id (awaitStreamed).
	sse       bool
	endpoint  atomic.Pointer[url.URL]
	pendingMu sync.Mutex
	pending   map[int64]chan *jsonrpc.Message
}

// remoteOptions are the settings of a remote connection.
type remoteOptions struct {
	onNotify   func(Notification)
	onRequest  requestHandler
	maxMessage int
	authorize  func(*config.Server, http.RoundTripper) (http.RoundTripper, error)
	// scrub removes secrets from an error body before it is cut short for an
	// error text; nil: bodies are quoted as sent.
	scrub func(string) string
}

// dialRemote prepares the connection to srv's URL. A streamable-HTTP
// upstream is first spoken to by the initialize (or server/discover) the
// caller sends; a legacy SSE upstream's stream is opened here, and ctx
// (connect_timeout) bounds the wait for the endpoint it names: the stream
// itself lives as long as the connection.
func dialRemote(ctx context.Context, srv *config.Server, log *slog.Logger, opts remoteOptions) (*remoteConn, error) {
	maxMessage := opts.maxMessage
	if maxMessage <= 0 {
		maxMessage = jsonrpc.DefaultMaxMessage
	}
	target, err := url.Parse(srv.URL)
	if err == nil && (target.Scheme != "http" && target.Scheme != "https" || target.Host == "") {
		err = errors.New("not an http or https URL")
	}
	if err != nil {
		return nil, fmt.Errorf("server %q: url: %w", srv.ID, err)
	}
	life, end := context.WithCancel(context.Background())
	c := &remoteConn{
		server: srv.ID, url: srv.URL, target: target, log: log, maxMessage: maxMessage, onNotify: opts.onNotify, onRequest: opts.onRequest,
		life: life, end: end, requests: newSlots(maxServerRequests), notices: newSlots(maxNotices), closed: make(chan struct{}),
		streamAnswered: make(chan struct{}),
		scrub:          opts.scrub, sse: srv.Transport == config.TransportSSE,
		streamFailed: throttledLog{throttle.Log{Every: streamFailureLogEvery}}, streamOversized: throttledLog{throttle.Log{Every: streamFailureLogEvery}},
	}
	if srv.SessionID != "" && !c.sse {
		session := srv.SessionID
		c.session.Store(&session)
	}
	// Enough idle connections that concurrent calls reuse them instead of
	// opening (and leaving in TIME_WAIT) a connection per call. Connections
	// are read and written with direct system calls (internal/pipeio);
	// dialled as the transport would without DialContext, and HTTP/2 where
	// it would use it.
	var base http.RoundTripper = &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: 90 * time.Second,
		DialContext: dialDirect, ForceAttemptHTTP2: true}
	if srv.Auth.Type != "" {
		if opts.authorize == nil {
			end()
			return nil, fmt.Errorf("auth: %s is set but this command does not authorize upstreams; run serve or tools", srv.Auth.Type)
		}
		if base, err = opts.authorize(srv, base); err != nil {
			end()
			return nil, err
		}
	}
	// Per-principal headers carry the caller of each request, read from
	// its context: a shared connection serves many callers, so no value
	// is kept on the connection.
	if len(srv.PrincipalHeaders) > 0 {
		base = credential.Headers(base, sameorigin.Origin(target), srv.PrincipalHeaders)
	}
	// The configured headers are set here, in the client, on every request
	// to the server's own origin, and on nothing else: not by the request's
	// builder. One place under every request (POST, GET stream, DELETE)
	// covers them all with no list of headers to keep in step. Since no
	// request is built with them, a redirect to another origin has none to
	// copy; the client's redirect policy drops them besides, and
	// Authorization and cookies with them (the OAuth token, set per request
	// by the authorizing transport, stays with the origin by itself).
	rt := sameorigin.Headers(base, sameorigin.Origin(target), srv.Headers)
	// A redirect elsewhere takes no credentials along, and a request's body
	// (a call's arguments) is not sent to an origin the config did not name.
	c.client = sameorigin.Client(&http.Client{Transport: rt}, sameorigin.Policy{Headers: sameorigin.HeaderNames(srv.Headers), RefuseBody: true})
	if c.sse {
		if err := c.openSSE(ctx); err != nil {
			c.fail(err)
			return nil, err
		}
	}
	return c, nil
}

// setProtocol records the protocol version the upstream agreed to; HTTP
// requests carry it from then on. A streamable-HTTP upstream of a
// generation with sessions then gets its GET stream (2026-07-28 has none:
// what it sends outside a request comes on subscriptions/listen).
func (c *remoteConn) setProtocol(version string) {
	c.protocol.Store(&version)
	if !c.sse && !protocol.Modern(version) {
		c.listenOnce.Do(func() { go c.listen() })
	}
}

// streamWait bounds how long a start waits for the upstream to answer its
// first GET stream request.
const streamWait = 2 * time.Second

// awaitStream waits, for at most streamWait and while ctx lasts, until the
// upstream has answered the first GET stream request (or it failed), so
// that what the upstream sends outside a request right after the start
// (a task's request for input, a list change) finds the stream open
// rather than being dropped for want of one. It returns at once where no
// GET stream is opened (legacy SSE, 2026-07-28).
func (c *remoteConn) awaitStream(ctx context.Context) {
	if c.sse {
		return
	}
	if v := c.protocol.Load(); v == nil || protocol.Modern(*v) {
		return
	}
	t := time.NewTimer(streamWait)
	defer t.Stop()
	select {
	case <-c.streamAnswered:
	case <-ctx.Done():
	case <-c.life.Done():
	case <-t.C:
	}
}

// streamAnswer marks the first GET stream request answered.
func (c *remoteConn) streamAnswer() { c.streamOnce.Do(func() { close(c.streamAnswered) }) }

// speakModern makes every request from now on one of protocol version
// (2026-07-28 or later): the envelope in its _meta, the standard headers
// mirroring it, no session.
func (c *remoteConn) speakModern(version string, env envelope) {
	c.envelope.Store(&env)
	c.setProtocol(version)
}

func (c *remoteConn) protocolVersion() string {
	if p := c.protocol.Load(); p != nil {
		return *p
	}
	return ""
}

// sessionID is the session requests carry, "" for none: a legacy SSE or
// sessionless upstream has none.
func (c *remoteConn) sessionID() string {
	if p := c.session.Load(); p != nil && !protocol.Modern(c.protocolVersion()) {
		return *p
	}
	return ""
}

func (c *remoteConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	select {
	case <-c.closed:
		return nil, c.closedErr()
	default:
	}
	id := c.nextID.Add(1)
	// The exchange also ends when the connection does.
	exchange, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life, func() { cancel(ErrClosed) })
	defer stop()
	m, err := c.request(exchange, cancel, id, method, params)
	if tooLong := (*jsonrpc.TooLongError)(nil); errors.As(err, &tooLong) {
		return nil, &oversizedResponse{server: c.server, TooLongError: tooLong}
	}
	if ctx.Err() != nil {
		c.cancelled(id, context.Cause(ctx))
		return nil, context.Cause(ctx)
	}
	if err != nil {
		if lost := (*lostSession)(nil); !errors.As(err, &lost) {
			select {
			case <-c.closed:
				return nil, c.closedErr()
			default:
			}
		}
		return nil, fmt.Errorf("server %q: %w", c.server, err)
	}
	if m.Error != nil {
		e := *m.Error
		e.Data = oneLine(e.Data)
		return nil, &e
	}
	return oneLine(m.Result), nil
}

// request sends the request id, in the envelope of a sessionless
// upstream, and returns its response.
func (c *remoteConn) request(ctx context.Context, cancel context.CancelCauseFunc, id int64, method string, params any) (*jsonrpc.Message, error) {
	raw, err := rawParams(params)
	var header http.Header
	if env := c.envelope.Load(); env != nil && err == nil {
		if raw, err = env.forRequest(ctx).wrap(raw); err == nil {
			header = standardHeaders(c.protocolVersion(), method, raw)
			if method == "tools/call" {
				addParamHeaders(header, c.paramTools.Load(), raw)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return c.exchange(ctx, cancel, id, method, raw, header)
}

// oneLine removes the line breaks a pretty-printing server leaves in a JSON
// value, so that it can go on down a newline-framed stream; every token
// stays as it was.
func oneLine(raw json.RawMessage) json.RawMessage {
	if !bytes.ContainsAny(raw, "\r\n") {
		return raw
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// cancelled tells the upstream a request was given up (cancelNotice).
func (c *remoteConn) cancelled(id int64, why error) {
	cancelNotice(c.notices, c.life, c.notify, id, why)
}

func (c *remoteConn) notify(ctx context.Context, method string, params any) error {
	m, err := jsonrpc.Notification(method, params)
	if err != nil {
		return err
	}
	return c.post(ctx, m)
}

// post sends a message that has no response (a notification, the answer to
// a request of the upstream) as it is, in a POST of its own. It ends with
// ctx or the connection.
func (c *remoteConn) post(ctx context.Context, m *jsonrpc.Message) error {
	select {
	case <-c.closed:
		return c.closedErr()
	default:
	}
	endpoint, err := c.postURL()
	if err != nil {
		return fmt.Errorf("server %q: %w", c.server, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.life, cancel)
	defer stop()
	req, _, err := c.newPost(ctx, endpoint, m.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		select {
		case <-c.closed:
			return c.closedErr()
		default:
		}
		return fmt.Errorf("server %q: %w", c.server, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyLimit))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return nil
	}
	return fmt.Errorf("server %q: it answered a POST of %s with HTTP status %d", c.server, describe(m), resp.StatusCode)
}

// postURL is where messages are POSTed: the server's URL, or the endpoint
// a legacy SSE upstream's stream named.
func (c *remoteConn) postURL() (string, error) {
	if !c.sse {
		return c.url, nil
	}
	u := c.endpoint.Load()
	if u == nil {
		return "", errors.New("its SSE stream has not named an endpoint yet")
	}
	return u.String(), nil
}

// describe names a message for an error text.
func describe(m *jsonrpc.Message) string {
	if m.Method != "" {
		return m.Method
	}
	return "the answer to its request " + string(m.ID)
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

// fail ends the connection, once: pending calls fail at once and every
// stream ends. It reports whether this call ended it.
func (c *remoteConn) fail(err error) (ended bool) {
	c.closeOnce.Do(func() {
		c.failure = err
		close(c.closed)
		c.end()
		ended = true
	})
	return ended
}

// close ends the connection and, when it still has a session, the session
// too: the specification asks a client that leaves a session to DELETE it.
func (c *remoteConn) close() error {
	if c.fail(fmt.Errorf("server %q was closed", c.server)) {
		c.endSession()
	}
	return nil
}

// sessionEndTimeout bounds the DELETE that ends a session.
const sessionEndTimeout = 5 * time.Second

// endSession sends the DELETE that ends the session, if there is one. A
// server that does not let clients end sessions answers 405, which is
// fine: the session then ends when the server says.
func (c *remoteConn) endSession() {
	if c.sse || c.sessionID() == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionEndTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	c.setHeaders(req.Header, "application/json, text/event-stream")
	resp, err := c.client.Do(req)
	if err != nil {
		c.log.Debug("could not end the upstream session", "server", c.server, "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyLimit))
	_ = resp.Body.Close()
}

// dialDirect dials as a zero net.Dialer does and makes the connection's
// reads and writes direct system calls, which do not wake the runtime's
// monitor thread (internal/pipeio).
func dialDirect(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return pipeio.NewConn(c), nil
}
