package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// A request is one POST (exchange), the same for both transports:
//   - with the session, the protocol version and Accept: application/json,
//     text/event-stream (setHeaders); the configured headers are the
//     client's to add;
//   - answered by a JSON body, or an event stream whose notifications and
//     requests are taken on the way to the response (streamedResponse); a
//     legacy SSE upstream answers the POST with a status only, and the
//     response comes on its one stream (awaitStreamed);
//   - a stream the upstream ends, before the response, after an event id is
//     resumed with a GET and Last-Event-ID after the time its retry field
//     asks for (before 2026-07-28, SEP-1699);
//   - an error status's body is the response when it is one.
//
// An error status that says the upstream no longer knows the session the
// request carried (sessionLost) fails the connection, so that the pool
// connects a new instance instead of every later call failing the same way.

const (
	// defaultResumeDelay is how long a stream the upstream ended is left
	// before it is opened again when the upstream named no retry time;
	// minResumeDelay is the shortest wait taken from one.
	defaultResumeDelay = time.Second
	minResumeDelay     = 10 * time.Millisecond
	// errorBodyLimit bounds what is read of an error status's body.
	errorBodyLimit = 64 << 10
)

// exchange sends the request id and returns its response. ctx bounds all of
// it, and cancel ends ctx; header, when not nil, is the request's own (it is
// written to).
func (c *remoteConn) exchange(ctx context.Context, cancel context.CancelCauseFunc, id int64, method string, params json.RawMessage, header http.Header) (*jsonrpc.Message, error) {
	endpoint, err := c.postURL()
	if err != nil {
		return nil, err
	}
	var streamed <-chan *jsonrpc.Message
	if c.sse {
		var forget func()
		streamed, forget = c.awaitStreamed(id)
		defer forget()
	}
	req, session, err := c.newPost(ctx, endpoint, requestBody(id, method, params), header)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := strconv.AppendInt(nil, id, 10)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
		if session != "" && method != "initialize" && sessionLost(resp.StatusCode, body) {
			err := &lostSession{fmt.Errorf("it no longer knows the session (HTTP %d to %s); connecting again", resp.StatusCode, method)}
			go c.fail(fmt.Errorf("server %q: %w", c.server, err))
			return nil, err
		}
		m, err := statusError(resp.StatusCode, body, method, want, c.scrub)
		if err != nil && method == "initialize" && !c.sse && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) {
			// How the specification tells a server of the legacy HTTP+SSE
			// transport: it takes no POST at its SSE URL.
			err = fmt.Errorf("%w; if it is a server of the legacy HTTP+SSE transport, set transport: sse and url to its SSE endpoint", err)
		}
		return m, err
	}
	if streamed != nil {
		// What the POST answers besides its status is not the response.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyLimit))
		select {
		case m := <-streamed:
			return m, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-c.closed:
			return nil, c.closedErr()
		}
	}
	if method == "initialize" {
		// The session starts with the answer to initialize, which names it
		// (or none: a server may keep no session).
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			c.session.Store(&s)
		}
	}
	if resp.StatusCode == http.StatusAccepted && resp.Header.Get("Content-Type") == "" {
		// 202 acknowledges a notification or a response; a request is
		// answered with its response, on a JSON body or an event stream.
		return nil, fmt.Errorf("it answered %s with HTTP 202 Accepted and no response; a server answers every request (check that url is the server's MCP endpoint)", method)
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		data, err := readBody(resp, c.maxMessage)
		if err != nil {
			return nil, err
		}
		data = validText(bytes.TrimPrefix(data, utf8BOM))
		if isBatch(data) {
			return c.batchResponse(ctx, data, method, want)
		}
		m, err := jsonrpc.DecodeOwned(data)
		if err != nil {
			return nil, fmt.Errorf("its response to %s is not a JSON-RPC response: %w", method, err)
		}
		if !m.IsResponse() || !bytes.Equal(m.ID, want) {
			return nil, fmt.Errorf("it answered %s (id %s) with a message that is not its response", method, want)
		}
		return m, nil
	case "text/event-stream":
		return c.streamedResponse(ctx, cancel, resp.Body, method, want)
	default:
		return nil, fmt.Errorf("it answered %s with content type %q; expected application/json or text/event-stream",
			method, resp.Header.Get("Content-Type"))
	}
}

// batchResponse takes a JSON body that is a JSON-RPC batch (batch.go) as
// the messages in it would be taken on the request's event stream, and
// returns the response whose id is want.
func (c *remoteConn) batchResponse(ctx context.Context, data []byte, method string, want []byte) (*jsonrpc.Message, error) {
	var answer *jsonrpc.Message
	err := c.unpack(data, func(_ []byte, m *jsonrpc.Message, _ error) {
		switch {
		case m == nil:
		case !m.IsResponse():
			c.received(ctx, m)
		case answer == nil && bytes.Equal(m.ID, want):
			answer = m
		}
	})
	if err != nil {
		return nil, fmt.Errorf("it answered %s with a JSON-RPC batch that cannot be taken: %w", method, err)
	}
	if answer == nil {
		return nil, fmt.Errorf("it answered %s (id %s) with a JSON-RPC batch that holds no response to it", method, want)
	}
	return answer, nil
}

// preallocated bounds the declared length a JSON body is read into at once.
const preallocated = 1 << 20

// readBody reads a response body whole, failing with a
// *jsonrpc.TooLongError once it is over max bytes: into one buffer of the
// declared length when there is one (the transport ends the body there),
// else as it comes.
func readBody(resp *http.Response, max int) ([]byte, error) {
	n := resp.ContentLength
	if n > int64(max) {
		return nil, &jsonrpc.TooLongError{Limit: max, Size: n}
	}
	if n >= 0 && n <= preallocated {
		data := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, err
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(max)+1))
	if err == nil && len(data) > max {
		return nil, &jsonrpc.TooLongError{Limit: max, Size: int64(len(data))}
	}
	return data, err
}

// requestBody is the request id as a POST carries it.
func requestBody(id int64, method string, params json.RawMessage) []byte {
	b := jsonrpc.AppendRequestLine(nil, id, method, params)
	return b[:len(b)-1] // no newline
}

// newPost is a POST of one JSON message to url with what every request of
// the connection carries (setHeaders), in header when it is not nil (it is
// written to). It returns the session it names.
func (c *remoteConn) newPost(ctx context.Context, url string, body []byte, header http.Header) (*http.Request, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	if header != nil {
		req.Header = header
	}
	session := c.setHeaders(req.Header, "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	return req, session, nil
}

// setHeaders sets what every request of the connection carries besides its
// body's type: accept, the protocol version and the session (before
// 2026-07-28); the configured headers are the client's to add
// (sameorigin.Headers in dialRemote). It returns the session sent.
func (c *remoteConn) setHeaders(h http.Header, accept string) (session string) {
	h.Set("Accept", accept)
	if version := c.protocolVersion(); version != "" {
		h.Set("MCP-Protocol-Version", version)
	}
	if session = c.sessionID(); session != "" {
		h.Set("Mcp-Session-Id", session)
	}
	return session
}

// sessionLost reports whether an error status to a request that carried a
// session says the upstream no longer knows it: 404, as the specification
// has it, or 400 with a body about the session, which is how servers built
// on the TypeScript SDK's examples answer a session they do not have
// ("Bad Request: No valid session ID provided").
func sessionLost(status int, body []byte) bool {
	switch status {
	case http.StatusNotFound:
		return true
	case http.StatusBadRequest:
		return bytes.Contains(bytes.ToLower(body), []byte("session"))
	}
	return false
}

// lostSession is the error of a request the upstream refused for its
// session: the connection ends over it, and the call says why.
type lostSession struct{ error }

func (e *lostSession) Unwrap() error { return e.error }

// statusError is what an exchange answered with an error status comes to:
// the JSON-RPC error response its body carries, or an error naming the
// status, quoting the body (scrub: see bodyExcerpt).
func statusError(status int, body []byte, method string, want []byte, scrub func(string) string) (*jsonrpc.Message, error) {
	if m, err := jsonrpc.Decode(bytes.TrimSpace(body)); err == nil && m.IsResponse() && m.Error != nil &&
		(bytes.Equal(m.ID, want) || string(m.ID) == "null") {
		return m, nil
	}
	return nil, fmt.Errorf("it answered %s with HTTP status %d%s", method, status, bodyExcerpt(body, scrub))
}

// bodyExcerpt is the start of an error body for an error text: printable,
// on one line, at most 200 bytes. scrub, when set, removes secrets first:
// a server that refuses a token may quote it, and one the cut split would no
// longer be recognised.
func bodyExcerpt(body []byte, scrub func(string) string) string {
	text := string(body)
	if scrub != nil {
		text = scrub(text)
	}
	text = strings.Join(strings.Fields(strings.ToValidUTF8(text, "?")), " ")
	if text == "" {
		return ""
	}
	if len(text) > 200 {
		text = strings.ToValidUTF8(text[:200], "") + "…"
	}
	return ": " + strconv.Quote(text)
}

// streamedResponse reads an event stream until the response whose id is
// want, resuming it while the upstream ends it first. Once the response is
// in, the exchange is cancelled before its stream is closed: on HTTP/2,
// closing a stream still open could otherwise wait on the connection.
func (c *remoteConn) streamedResponse(ctx context.Context, cancel context.CancelCauseFunc, body io.ReadCloser, method string, want []byte) (*jsonrpc.Message, error) {
	var cursor sseCursor
	for {
		m, err := c.readResponse(ctx, newSSEReader(body, c.maxMessage, &cursor), want)
		if m != nil {
			cancel(nil)
			_ = body.Close()
			return m, nil
		}
		_ = body.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if bad := (*malformedResponse)(nil); errors.As(err, &bad) {
			bad.method = method
		}
		if err != io.EOF || cursor.lastID == "" || protocol.Modern(c.protocolVersion()) {
			if err == io.EOF {
				return nil, fmt.Errorf("its event stream for %s ended before the response", method)
			}
			return nil, err
		}
		if body, err = c.resume(ctx, &cursor, method); err != nil {
			return nil, err
		}
	}
}

// readResponse reads events until one carries the response want (returned)
// or the stream ends (io.EOF) or fails. The upstream's notifications and
// requests on the way are taken as they come (received), as the request's:
// ctx names the Do that sent it (flightOf).
func (c *remoteConn) readResponse(ctx context.Context, r *sseReader, want []byte) (*jsonrpc.Message, error) {
	for {
		ev, err := r.next()
		if err != nil {
			return nil, err
		}
		data := messageData(ev)
		if data == nil {
			continue
		}
		var answer *jsonrpc.Message
		var bad error
		err = c.unpack(data, func(raw []byte, m *jsonrpc.Message, decodeErr error) {
			switch {
			case m == nil:
				// Meant as the response but unreadable (see
				// jsonrpc.AnswerID): the call fails now rather than wait
				// for the stream to end.
				if answer == nil && bad == nil && bytes.Equal(jsonrpc.AnswerID(raw), want) {
					bad = &malformedResponse{err: decodeErr}
				}
			case !m.IsResponse():
				c.received(ctx, m)
			case answer == nil && bytes.Equal(m.ID, want):
				answer = m
			}
		})
		switch {
		case err != nil:
			c.refusedBatch(data, err)
		case answer != nil:
			return answer, nil
		case bad != nil:
			return nil, bad
		}
	}
}

// malformedResponse is the response to a request that cannot be read.
type malformedResponse struct {
	method string
	err    error
}

func (e *malformedResponse) Error() string {
	return fmt.Sprintf("its response to %s cannot be read (%v); the server does not follow JSON-RPC 2.0, report it to its maintainers", e.method, e.err)
}

func (e *malformedResponse) Unwrap() error { return e.err }

// resume waits the reconnection time, then reopens the request's stream
// with a GET that names the last event it saw.
func (c *remoteConn) resume(ctx context.Context, cursor *sseCursor, method string) (io.ReadCloser, error) {
	if err := sleep(ctx, cursor.delay()); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	c.setHeaders(req.Header, "text/event-stream")
	req.Header.Set("Last-Event-ID", cursor.lastID)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("resuming the event stream of %s after event %q: HTTP status %d, content type %q",
			method, cursor.lastID, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp.Body, nil
}

// delay is how long to wait before a stream is opened again: what the
// upstream asked for, else defaultResumeDelay.
func (cur *sseCursor) delay() time.Duration {
	if cur.hasRetry {
		return max(cur.retry, minResumeDelay)
	}
	return defaultResumeDelay
}

// sleep waits d, or until ctx ends (its cause).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// mediaType is a Content-Type's media type, lower case, without parameters.
func mediaType(contentType string) string {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}
