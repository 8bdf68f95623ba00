package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"net"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
	"github.com/mcp-aggregator/mcp-aggregator/internal/throttle"
)

// remoteConn speaks to a streamable-HTTP or SSE upstream. mcp-go's client
// transports open the connection (initialize, server/discover, the GET
// stream) and carry a legacy SSE upstream's requests; a streamable-HTTP
// upstream's requests after that are raw POSTs of the aggregator's own
// (exchange, remote_call.go). Everything else the upstream sends
// (notifications, and its own requests) mcp-go would decode into maps (big
// integers lose their precision, members get added), so the HTTP client
// under mcp-go takes those out of the event streams raw (eventTap), and the
// aggregator's notifications and answers go out as raw POSTs of its own
// (post).
//
// Concurrency rules: notifications are handed on the goroutine that reads
// their stream, so the handler must not block (Instance.notified does not);
// each request of the upstream is answered on a goroutine of its own, at
// most maxServerRequests at once, and what is beyond is dropped at once.
// Every HTTP exchange is bounded by its caller's ctx or, for what the
// aggregator sends on its own, by noticeTimeout, and ends when the
// connection does; close ends the transport's streams.
type remoteConn struct {
	scrub     func(string) string // see remoteOptions.scrub
	server    string
	url       string
	t         transport.Interface
	client    *http.Client
	log       *slog.Logger
	onNotify  func(Notification)
	onRequest requestHandler
	protocol  atomic.Pointer[string]
	// envelope is set for a sessionless (2026-07-28) upstream.
	envelope  atomic.Pointer[envelope]
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
	// streamable is set for a streamable-HTTP upstream, whose requests go
	// out through exchange once its session is up.
	streamable bool
	// streamSession is the session a GET stream last opened on.
	streamSession atomic.Pointer[string]
	// sse is set for a legacy SSE upstream; sseCalls are its requests
	// awaiting their responses on its stream, by id (exchangeSSE).
	sse      bool
	sseMu    sync.Mutex
	sseCalls map[int64]chan *jsonrpc.Message
	// target is url, parsed (nil if it does not parse); refused carries,
	// once, why the endpoint a legacy SSE upstream named was refused
	// (streamEndpoint).
	target  *url.URL
	refused chan error
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

// dialRemote connects to srv's URL; ctx (connect_timeout) bounds only the
// wait: the transport's streams live as long as the connection.
func dialRemote(ctx context.Context, srv *config.Server, log *slog.Logger, opts remoteOptions) (*remoteConn, error) {
	maxMessage := opts.maxMessage
	if maxMessage <= 0 {
		maxMessage = jsonrpc.DefaultMaxMessage
	}
	life, end := context.WithCancel(context.Background())
	target, _ := url.Parse(srv.URL) // mcp-go reports a URL that does not parse
	c := &remoteConn{
		server: srv.ID, url: srv.URL, log: log, onNotify: opts.onNotify, onRequest: opts.onRequest,
		life: life, end: end, requests: newSlots(maxServerRequests), notices: newSlots(maxNotices), closed: make(chan struct{}),
		target: target, refused: make(chan error, 1), scrub: opts.scrub,
	}
	// Enough idle connections that concurrent calls reuse them instead of
	// opening (and leaving in TIME_WAIT) a connection per call; every body
	// bounded to maxMessage per message, and every event stream tapped.
	// Connections are read and written with direct system calls
	// (internal/pipeio); dialled as the transport would without DialContext,
	// and HTTP/2 where it would use it.
	var base http.RoundTripper = &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: 90 * time.Second,
		DialContext: dialDirect, ForceAttemptHTTP2: true}
	if srv.Auth.Type != "" {
		// Under the size bound and the tap, so that a request the
		// authorizer sends again (after a refresh on a 401) is bounded and
		// tapped like any other.
		if opts.authorize == nil {
			end()
			return nil, fmt.Errorf("auth: %s is set but this command does not authorize upstreams; run serve or tools", srv.Auth.Type)
		}
		var err error
		if base, err = opts.authorize(srv, base); err != nil {
			end()
			return nil, err
		}
	}
	// The configured headers are set here, in the client, on every request
	// to the server's own origin, and on nothing else: not by the request's
	// builder. mcp-go's transports build some requests with them (initialize,
	// the GET stream) and some without (the DELETE that ends the session),
	// and the raw POSTs are built apart again; one place under all of them
	// covers every request with no list of headers to keep in step. Since
	// no request is built with them, a redirect to another origin has none
	// to copy; the client's redirect policy drops them besides, and
	// Authorization and cookies with them (the OAuth token, set per request
	// by the authorizing transport, stays with the origin by itself).
	var rt http.RoundTripper = &limitedTransport{base: base, max: maxMessage, server: srv.ID, log: log, tap: c, opened: c.streamOpened,
		dropped: throttledLog{throttle.Log{Every: streamFailureLogEvery}}}
	rt = sameorigin.Headers(rt, sameorigin.Origin(target), srv.Headers)
	// A redirect elsewhere takes no credentials along, and a request's body
	// (a call's arguments) is not sent to an origin the config did not name.
	c.client = sameorigin.Client(&http.Client{Transport: rt}, sameorigin.Policy{Headers: sameorigin.HeaderNames(srv.Headers), RefuseBody: true})
	// What mcp-go logs itself goes to the instance's log, structured.
	mcpLog := slog.New(newNoStreamNotice(log.Handler())).With("server", srv.ID)
	var err error
	if srv.Transport == config.TransportSSE {
		var sse *transport.SSE
		sse, err = transport.NewSSE(srv.URL, transport.WithHTTPClient(c.client), transport.WithSSELogger(mcpLog))
		if err == nil {
			// Every response of a legacy SSE server comes down its one
			// stream: once that is gone, pending calls would only wait for
			// their deadlines, so the connection fails them now.
			sse.SetConnectionLostHandler(func(err error) {
				go c.fail(fmt.Errorf("server %q: its SSE stream ended: %w", srv.ID, err))
			})
			c.t, c.sse = sse, true
		}
	} else {
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(mcpLog), transport.WithHTTPBasicClient(c.client),
			// The GET stream carries what the server sends outside any
			// request, tools/list_changed above all.
			transport.WithContinuousListening()}
		if srv.SessionID != "" {
			opts = append(opts, transport.WithSession(srv.SessionID))
		}
		c.t, err = transport.NewStreamableHTTP(srv.URL, opts...)
		c.streamable = true
	}
	if err != nil {
		end()
		return nil, err
	}
	// Only what eventTap lets through reaches mcp-go's handler: messages it
	// could not read as JSON-RPC, or events of other types.
	c.t.SetNotificationHandler(c.decodedNotification)
	started := make(chan error, 1)
	go func() { started <- c.t.Start(life) }()
	// A refused SSE endpoint ends the wait at once, and says why: left
	// alone, mcp-go would wait for an endpoint it accepts until ctx ends.
	var refused error
	select {
	case err = <-started:
	case refused = <-c.refused:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil && refused == nil {
		select {
		case refused = <-c.refused: // the reason Start failed
		default:
		}
	}
	if err != nil || refused != nil {
		end()
		_ = c.t.Close()
		if refused != nil {
			return nil, refused // names no more of the URL than its origin
		}
		return nil, fmt.Errorf("connect %s: %w", srv.URL, err)
	}
	return c, nil
}

// setProtocol records the protocol version the upstream agreed to; HTTP
// requests carry it from then on.
func (c *remoteConn) setProtocol(version string) {
	c.protocol.Store(&version)
	if pv, ok := c.t.(transport.HTTPConnection); ok {
		pv.SetProtocolVersion(version)
	}
}

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

// streamNotified takes a notification out of an event stream (eventTap).
func (c *remoteConn) streamNotified(n Notification) {
	if c.onNotify != nil {
		c.onNotify(n)
	}
}

// streamEndpoint vets the endpoint a legacy SSE upstream's stream names
// (eventTap) before mcp-go reads it, and reports whether it goes on. One on
// another origin than url is refused: the requests sent to it would carry
// the server's credentials (its configured headers, its OAuth token) to
// whoever that origin is. mcp-go refuses another host too, but only in a
// line of its log, and then waits for an endpoint that never comes; here
// the start fails at once, saying why, and a connection already up ends.
func (c *remoteConn) streamEndpoint(data string) bool {
	if !c.sse {
		return true
	}
	err := c.vetEndpoint(data)
	if err == nil {
		return true
	}
	select {
	case c.refused <- err:
	default:
	}
	go c.fail(fmt.Errorf("server %q: %w", c.server, err))
	return false
}

// vetEndpoint says what is wrong with data as the endpoint of a legacy SSE
// upstream, or nil. Its errors name only origins and hosts: a URL's path
// and query may carry secrets.
func (c *remoteConn) vetEndpoint(data string) error {
	own := sameorigin.Origin(c.target)
	if own == "" {
		return nil // mcp-go says what is wrong with url
	}
	u, err := c.target.Parse(data)
	if err != nil {
		return errors.New("its SSE stream named an endpoint that is not a URL; check that url is the server's SSE endpoint")
	}
	if theirs := sameorigin.Origin(u); theirs != own {
		if theirs == "" {
			theirs = "no origin"
		}
		return fmt.Errorf("its SSE endpoint is on another origin (%s) than its url (%s), and is refused so that the server's "+
			"credentials stay with their origin; point url at an SSE server whose endpoint is on the same origin, "+
			"or use the server's streamable HTTP endpoint (transport: streamable_http)", theirs, own)
	}
	if u.Host != c.target.Host {
		// One origin written two ways (a default port spelled out, upper
		// case): the SSE client compares the hosts as written.
		return fmt.Errorf("its SSE endpoint writes its host as %q where url writes %q, which the SSE client does not accept; "+
			"write url's host as the endpoint does", u.Host, c.target.Host)
	}
	return nil
}

// streamRequested takes a request of the upstream out of an event stream
// (eventTap); ctx is the HTTP exchange's, which names the Do whose response
// stream it is. The answer goes back in a POST of its own. A request
// beyond maxServerRequests is dropped rather than answered: answering a
// flood would be one more HTTP exchange per request.
func (c *remoteConn) streamRequested(ctx context.Context, req *jsonrpc.Message) {
	if !c.requests.take() {
		c.dropped.warn(c.log, "upstream sent more concurrent requests than the aggregator handles; dropped", "server", c.server,
			"method", req.Method, "id", string(req.ID))
		return
	}
	flight := flightOf(ctx)
	go func() {
		defer c.requests.release()
		resp, ok := answerLocally(req, c.onRequest)
		if !ok {
			resp = c.onRequest(c.life, req, flight)
		}
		if resp == nil {
			return
		}
		ctx, cancel := context.WithTimeout(c.life, noticeTimeout)
		defer cancel()
		if err := c.post(ctx, resp); err != nil && c.life.Err() == nil {
			c.log.Warn("could not answer the upstream's request", "server", c.server, "method", req.Method, "err", err)
		}
	}()
}

// streamRefused is told of a batch in an event stream that cannot be taken
// (eventTap). Only its size is logged: what a server sends may hold secrets.
func (c *remoteConn) streamRefused(data []byte, why error) {
	c.dropped.warn(c.log, "upstream sent a JSON-RPC batch that cannot be taken; ignored", "server", c.server,
		"bytes", len(data), "err", why)
}

// decodedNotification takes a notification mcp-go decoded itself. Its
// params went through a map: only what the upstream sent is put back (mcp-go
// adds an empty _meta to every notification it decodes), but numbers have
// passed through float64.
func (c *remoteConn) decodedNotification(n mcp.JSONRPCNotification) {
	if c.onNotify == nil {
		return
	}
	fields := make(map[string]any, len(n.Params.AdditionalFields)+1)
	for k, v := range n.Params.AdditionalFields {
		fields[k] = v
	}
	if len(n.Params.Meta) > 0 {
		fields["_meta"] = n.Params.Meta
	}
	var params json.RawMessage
	if len(fields) > 0 {
		params, _ = rawjson.Marshal(fields)
	}
	c.onNotify(Notification{Method: n.Method, Params: params})
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
	var (
		result json.RawMessage
		rpcErr *RPCError
		err    error
	)
	if c.rawExchange(method) {
		result, rpcErr, err = c.callRaw(exchange, cancel, id, method, params)
	} else {
		result, rpcErr, err = c.callThroughTransport(exchange, id, method, params)
	}
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
	if rpcErr != nil {
		return nil, rpcErr
	}
	return oneLine(result), nil
}

// callRaw makes a request through exchange (remote_call.go).
func (c *remoteConn) callRaw(ctx context.Context, cancel context.CancelCauseFunc, id int64, method string, params any) (json.RawMessage, *RPCError, error) {
	raw, err := rawParams(params)
	var header http.Header
	if env := c.envelope.Load(); env != nil && err == nil {
		if raw, err = env.wrap(raw); err == nil {
			header = standardHeaders(c.protocolVersion(), method, raw)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	var m *jsonrpc.Message
	if c.sse {
		m, err = c.exchangeSSE(ctx, id, method, raw)
	} else {
		m, err = c.exchange(ctx, cancel, id, method, raw, header)
	}
	if err != nil {
		return nil, nil, err
	}
	if m.Error != nil {
		e := *m.Error
		e.Data = oneLine(e.Data)
		return nil, &e, nil
	}
	return m.Result, nil, nil
}

// callThroughTransport makes a request through mcp-go's transport.
func (c *remoteConn) callThroughTransport(ctx context.Context, id int64, method string, params any) (json.RawMessage, *RPCError, error) {
	request := transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method, Params: params}
	if env := c.envelope.Load(); env != nil {
		raw, err := rawParams(params)
		if err == nil {
			raw, err = env.wrap(raw)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", method, err)
		}
		request.Params, request.Header = raw, standardHeaders(c.protocolVersion(), method, raw)
	}
	resp, err := c.t.SendRequest(ctx, request)
	if err != nil {
		return nil, nil, err
	}
	if resp.Error != nil {
		data, _ := rawjson.Marshal(resp.Error.Data)
		if resp.Error.Data == nil {
			data = nil
		}
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: oneLine(data)}, nil
	}
	return resp.Result, nil, nil
}

// oneLine removes the line breaks a pretty-printing server leaves in a JSON
// value (mcp-go keeps a result's bytes as they came), so that it can go on
// down a newline-framed stream; every token stays as it was.
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
// a request of the upstream) as it is, in a POST of its own, with what
// mcp-go's transport would send: the session, the protocol version and the
// configured headers. It ends with ctx or the connection.
func (c *remoteConn) post(ctx context.Context, m *jsonrpc.Message) error {
	select {
	case <-c.closed:
		return c.closedErr()
	default:
	}
	endpoint := c.url
	if sse, ok := c.t.(*transport.SSE); ok {
		u := sse.GetEndpoint()
		if u == nil {
			return fmt.Errorf("server %q: its SSE stream has not named an endpoint yet", c.server)
		}
		endpoint = u.String()
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
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return nil
	}
	return fmt.Errorf("server %q: it answered a POST of %s with HTTP status %d", c.server, describe(m), resp.StatusCode)
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

// noStreamNotice passes on what mcp-go logs, except that its error for a
// server that answers the GET stream with 405 becomes an info line: the
// protocol lets a server offer no stream, and such a server is not failing.
// And mcp-go opens a failing GET stream again every second for as long as
// the connection lives, logging each failure; those lines are cut to the
// first and then one a minute (saying how many were left out), so that a
// server whose stream keeps failing does not fill the log.
type noStreamNotice struct {
	slog.Handler
	failing map[string]*throttledLog // by message: those of streamFailures
}

// newNoStreamNotice wraps h.
func newNoStreamNotice(h slog.Handler) noStreamNotice {
	failing := map[string]*throttledLog{}
	for _, msg := range streamFailures {
		failing[msg] = &throttledLog{throttle.Log{Every: streamFailureLogEvery}}
	}
	return noStreamNotice{Handler: h, failing: failing}
}

// streamFailureLogEvery is how often a GET stream that keeps failing is
// logged, after its first failure.
const streamFailureLogEvery = time.Minute

// streamFailures are mcp-go's messages for a GET stream that failed.
var streamFailures = []string{"failed to listen to server. retry in 1 second", "SSE stream error"}

func (h noStreamNotice) Handle(ctx context.Context, r slog.Record) error {
	if t := h.failing[r.Message]; t != nil && r.Level == slog.LevelError {
		ok, skipped := t.Allow()
		if !ok {
			return nil
		}
		if skipped > 0 {
			r = r.Clone()
			r.AddAttrs(slog.Int("suppressed", skipped))
		}
		return h.Handler.Handle(ctx, r)
	}
	if r.Level == slog.LevelError && r.Message == "server does not support listening" {
		if !h.Handler.Enabled(ctx, slog.LevelInfo) {
			return nil
		}
		quiet := slog.NewRecord(r.Time, slog.LevelInfo, "server offers no GET stream (HTTP 405); it sends only what answers a request", r.PC)
		r.Attrs(func(a slog.Attr) bool {
			quiet.AddAttrs(a)
			return true
		})
		r = quiet
	}
	return h.Handler.Handle(ctx, r)
}

func (h noStreamNotice) WithAttrs(attrs []slog.Attr) slog.Handler {
	return noStreamNotice{h.Handler.WithAttrs(attrs), h.failing}
}

func (h noStreamNotice) WithGroup(name string) slog.Handler {
	return noStreamNotice{h.Handler.WithGroup(name), h.failing}
}
