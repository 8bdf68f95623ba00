package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

// What a remote upstream sends besides the responses to the aggregator's
// requests: notifications and requests of its own, on a request's event
// stream, on the GET stream of a streamable-HTTP upstream (listen), or on
// the one stream of a legacy SSE upstream (readSSE). Each arrives raw and
// is handed on raw (received).

// unpack hands take each message of data, an event's or a body's: one
// message, or each one of a JSON-RPC batch (batch.go) as if it had come
// alone. take is given the message's bytes, and the message, or nil and why
// it cannot be read. A batch that cannot be taken is not unpacked: the
// error says why.
func (c *remoteConn) unpack(data []byte, take func(raw []byte, m *jsonrpc.Message, err error)) error {
	if !isBatch(data) {
		m, err := eventMessage(data)
		take(data, m, err)
		return nil
	}
	elems, err := splitBatch(data)
	if err != nil {
		return err
	}
	for _, elem := range elems {
		if isBatch(elem) {
			c.refusedBatch(elem, errNestedBatch)
			continue
		}
		m, err := eventMessage(elem)
		take(elem, m, err)
	}
	return nil
}

// eventMessage is data as a JSON-RPC message, or nil and why it is not
// one. The message keeps slices of data.
func eventMessage(data []byte) (*jsonrpc.Message, error) {
	m, err := jsonrpc.DecodeOwned(data)
	if err != nil {
		if loose := looseNotification(data); loose != nil {
			return loose, nil
		}
		return nil, err
	}
	return m, nil
}

// looseNotification reads data that is not valid JSON-RPC as most clients
// would: a message with a method and no id is a notification, whatever its
// "jsonrpc" member says. Its params stay as they came; anything else is nil.
func looseNotification(data []byte) *jsonrpc.Message {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &m) != nil || m.Method == "" || (len(m.ID) > 0 && string(m.ID) != "null") {
		return nil
	}
	if string(m.Params) == "null" {
		m.Params = nil
	}
	return &jsonrpc.Message{Method: m.Method, Params: m.Params}
}

// received takes a notification or request of the upstream; ctx names the
// Do on whose response stream it came (flightOf), or none. It does not
// block: a notification is handed on here (onNotify must not block), a
// request is answered on a goroutine of its own.
func (c *remoteConn) received(ctx context.Context, m *jsonrpc.Message) {
	switch {
	case m.IsNotification():
		if c.onNotify != nil {
			c.onNotify(Notification{Method: m.Method, Params: m.Params, flight: flightOf(ctx)})
		}
	case m.IsRequest():
		c.serve(flightOf(ctx), m)
	}
}

// serve answers a request of the upstream, in a POST of its own. A request
// beyond maxServerRequests is dropped rather than answered: answering a
// flood would be one more HTTP exchange per request.
func (c *remoteConn) serve(flight uint64, req *jsonrpc.Message) {
	if !c.requests.take() {
		c.dropped.warn(c.log, "upstream sent more concurrent requests than the aggregator handles; dropped", "server", c.server,
			"method", req.Method, "id", string(req.ID))
		return
	}
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

// refusedBatch is told of a batch in an event stream that cannot be taken.
// Only its size is logged: what a server sends may hold secrets.
func (c *remoteConn) refusedBatch(data []byte, why error) {
	c.dropped.warn(c.log, "upstream sent a JSON-RPC batch that cannot be taken; ignored", "server", c.server,
		"bytes", len(data), "err", why)
}

// streamFailureLogEvery is how often a GET stream that keeps failing is
// logged, after its first failure.
const streamFailureLogEvery = time.Minute

// streamStatus is a GET stream refused with an HTTP status.
type streamStatus struct {
	code int
	body []byte
}

func (e *streamStatus) Error() string { return "HTTP status " + strconv.Itoa(e.code) }

// listen keeps the GET stream of a streamable-HTTP upstream open for as
// long as the connection lives: what the upstream sends outside any
// request (tools/list_changed above all) comes on it. When the stream ends
// or fails it is opened again after the time the upstream asked for (retry)
// or a second, from the last event it dispatched (Last-Event-ID), so that
// the upstream can replay what was sent in between. A server that offers
// no stream (405) is left alone; one that answers a stream on the session
// as sessionLost has it, having once opened one on it, forgot the session
// (it restarted), and the connection fails so that the pool connects
// again.
func (c *remoteConn) listen() {
	var cursor sseCursor
	opened := false // the stream was opened on the session once
	for c.life.Err() == nil {
		ok, err := c.openStream(&cursor)
		opened = opened || ok
		if c.life.Err() != nil {
			return
		}
		var status *streamStatus
		var tooLong *jsonrpc.TooLongError
		switch {
		case errors.As(err, &status) && status.code == http.StatusMethodNotAllowed:
			c.log.Info("server offers no GET stream (HTTP 405); it sends only what answers a request", "server", c.server)
			return
		case errors.As(err, &status) && (status.code == http.StatusNotFound || c.sessionID() != "" && sessionLost(status.code, status.body)):
			if opened && c.sessionID() != "" {
				c.fail(fmt.Errorf("server %q: it no longer knows the session (HTTP %d to the GET stream); connecting again", c.server, status.code))
				return
			}
			// Refused on a session that never had a stream, or with no
			// session at all: the server offers none, saying so the wrong
			// way (405 is right).
			c.log.Info("server offers no GET stream; it sends only what answers a request", "server", c.server, "status", status.code)
			return
		case errors.As(err, &tooLong):
			c.streamOversized.warn(c.log, "upstream sent a message over the size limit on its stream; the stream is dropped", "server", c.server, "limit", tooLong.Limit)
		case err != nil:
			c.streamFailed.warn(c.log, "GET stream failed; opening it again", "server", c.server, "err", err, "retry", cursor.delay())
		}
		if sleep(c.life, cursor.delay()) != nil {
			return
		}
	}
}

// openStream opens the GET stream, from the event cursor names if any, and
// reads it until it ends (nil) or fails. It reports whether the upstream
// opened it.
func (c *remoteConn) openStream(cursor *sseCursor) (opened bool, err error) {
	req, err := http.NewRequestWithContext(c.life, http.MethodGet, c.url, nil)
	if err != nil {
		return false, err
	}
	c.setHeaders(req.Header, "text/event-stream")
	if cursor.lastID != "" {
		req.Header.Set("Last-Event-ID", cursor.lastID)
	}
	resp, err := c.client.Do(req)
	c.streamAnswer()
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
		return false, &streamStatus{code: resp.StatusCode, body: body}
	}
	if t := resp.Header.Get("Content-Type"); mediaType(t) != "text/event-stream" {
		return false, fmt.Errorf("it answered the GET stream with content type %q; expected text/event-stream", t)
	}
	r := newSSEReader(resp.Body, c.maxMessage, cursor)
	for {
		ev, err := r.next()
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return true, err
		}
		c.streamed(c.life, ev)
	}
}

// streamed takes an event of a stream no request owns: its notifications
// and requests are received; responses, which no one awaits there, are
// let be.
func (c *remoteConn) streamed(ctx context.Context, ev sseEvent) {
	data := messageData(ev)
	if data == nil {
		return
	}
	if err := c.unpack(data, func(_ []byte, m *jsonrpc.Message, _ error) {
		switch {
		case m == nil:
		case m.IsResponse():
			c.answered(m)
		default:
			c.received(ctx, m)
		}
	}); err != nil {
		c.refusedBatch(data, err)
	}
}

// The legacy HTTP+SSE transport (protocol 2024-11-05): the client opens
// one event stream with a GET; its first event, "endpoint", names the URL
// the client POSTs its messages to, and everything the server sends
// (responses included) comes down that stream.

// openSSE opens a legacy SSE upstream's stream and waits, within ctx, for
// the endpoint it names; the stream is then read until the connection ends
// (readSSE). Once the stream is gone, the connection fails: every response
// would have come on it.
func (c *remoteConn) openSSE(ctx context.Context) error {
	req, err := http.NewRequestWithContext(c.life, http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	c.setHeaders(req.Header, "text/event-stream")
	stop := context.AfterFunc(ctx, c.end) // ctx bounds only the wait for the endpoint
	resp, err := c.client.Do(req)
	if err != nil {
		stop()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("connect %s: %w", sameorigin.Origin(c.target), err)
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		stop()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
		_ = resp.Body.Close()
		return fmt.Errorf("server %q: its SSE stream answered HTTP status %d, content type %q%s; check that url is the server's SSE endpoint",
			c.server, resp.StatusCode, resp.Header.Get("Content-Type"), bodyExcerpt(body, c.scrub))
	}
	r := newSSEReader(resp.Body, c.maxMessage, nil)
	named := make(chan error, 1)
	go c.readSSE(resp.Body, r, named)
	select {
	case err = <-named:
	case <-c.closed:
		err = c.failure
	}
	if !stop() && ctx.Err() != nil {
		return fmt.Errorf("server %q: its SSE stream named no endpoint before connect_timeout; check that url is the server's SSE endpoint: %w", c.server, ctx.Err())
	}
	return err
}

// readSSE reads a legacy SSE upstream's stream until it ends, which fails
// the connection. The first endpoint event (or why it is refused) goes to
// named.
func (c *remoteConn) readSSE(body io.ReadCloser, r *sseReader, named chan<- error) {
	defer body.Close()
	first := true
	for {
		ev, err := r.next()
		if err != nil {
			c.fail(fmt.Errorf("server %q: its SSE stream ended: %w", c.server, err))
			return
		}
		if ev.kind != "endpoint" {
			c.streamed(c.life, ev)
			continue
		}
		u, err := c.vetEndpoint(string(ev.data))
		if err != nil {
			err = fmt.Errorf("server %q: %w", c.server, err)
			c.fail(err)
			if first {
				named <- err
			}
			return
		}
		c.endpoint.Store(u)
		if first {
			first = false
			named <- nil
		}
	}
}

// vetEndpoint returns data as the endpoint of a legacy SSE upstream, or
// what is wrong with it. One on another origin than url is refused: the
// requests sent to it would carry the server's credentials (its configured
// headers, its OAuth token) to whoever that origin is. Its errors name only
// origins: a URL's path and query may carry secrets.
func (c *remoteConn) vetEndpoint(data string) (*url.URL, error) {
	u, err := c.target.Parse(data)
	if err != nil {
		return nil, errors.New("its SSE stream named an endpoint that is not a URL; check that url is the server's SSE endpoint")
	}
	own := sameorigin.Origin(c.target)
	if theirs := sameorigin.Origin(u); theirs != own {
		if theirs == "" {
			theirs = "no origin"
		}
		return nil, fmt.Errorf("its SSE endpoint is on another origin (%s) than its url (%s), and is refused so that the server's "+
			"credentials stay with their origin; point url at an SSE server whose endpoint is on the same origin, "+
			"or use the server's streamable HTTP endpoint (transport: streamable_http)", theirs, own)
	}
	return u, nil
}

// awaitStreamed registers the request id of a legacy SSE upstream, whose
// response comes on its stream (answered), and returns where it will be
// put and how to forget the request.
func (c *remoteConn) awaitStreamed(id int64) (<-chan *jsonrpc.Message, func()) {
	answer := make(chan *jsonrpc.Message, 1)
	c.pendingMu.Lock()
	if c.pending == nil {
		c.pending = map[int64]chan *jsonrpc.Message{}
	}
	c.pending[id] = answer
	c.pendingMu.Unlock()
	return answer, func() {
		c.pendingMu.Lock()
		delete(c.pending, id)
		c.pendingMu.Unlock()
	}
}

// answered hands a response that came on a stream no request owns to the
// exchange of a legacy SSE upstream awaiting it (awaitStreamed), if any;
// any other is let be.
func (c *remoteConn) answered(m *jsonrpc.Message) {
	key, ok := sentID(m.ID)
	if !ok || !c.sse {
		return
	}
	c.pendingMu.Lock()
	answer := c.pending[key]
	delete(c.pending, key)
	c.pendingMu.Unlock()
	if answer != nil {
		answer <- m // its one answer, into a buffer of one
	}
}
