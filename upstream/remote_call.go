package upstream

import (
	"bufio"
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

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// A streamable-HTTP upstream's requests, once its session is up, go out as
// POSTs the aggregator builds itself, and their responses are read raw
// (exchange): the request's params are already JSON, and the result goes
// on as the bytes that came, so mcp-go's transport would only encode and
// decode each message once more and start a goroutine per request to watch
// for its own close. mcp-go keeps what opens and keeps the session:
// initialize and server/discover (which record the session and the
// protocol), and the GET stream. A legacy SSE upstream's requests are raw
// POSTs too, their responses taken off its stream (exchangeSSE).
//
// exchange does what mcp-go's SendRequest does with the exchange:
//   - the session, the protocol version, the configured headers;
//   - a JSON body or an event stream (whose notifications and requests
//     eventTap has already taken out) carrying the response;
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
	// before it is resumed when the upstream named no retry time;
	// minResumeDelay is the shortest wait taken from one.
	defaultResumeDelay = time.Second
	minResumeDelay     = 10 * time.Millisecond
	// errorBodyLimit bounds what is read of an error status's body.
	errorBodyLimit = 64 << 10
)

// rawExchange reports whether a request of method goes out through
// exchange, or exchangeSSE.
func (c *remoteConn) rawExchange(method string) bool {
	return (c.streamable || c.sse) && method != string(mcp.MethodInitialize) && method != string(mcp.MethodServerDiscover)
}

// exchangeSSE sends the request id to a legacy SSE upstream, in a POST to
// the endpoint its stream named, and waits for the response on that stream,
// where eventTap hands it over (streamResponse) before mcp-go would read
// it. ctx bounds all of it; the connection's end (its stream lost) fails it.
func (c *remoteConn) exchangeSSE(ctx context.Context, id int64, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	sse, _ := c.t.(*transport.SSE)
	u := sse.GetEndpoint()
	if u == nil {
		return nil, errors.New("its SSE stream has not named an endpoint yet")
	}
	answer := make(chan *jsonrpc.Message, 1)
	c.sseMu.Lock()
	if c.sseCalls == nil {
		c.sseCalls = map[int64]chan *jsonrpc.Message{}
	}
	c.sseCalls[id] = answer
	c.sseMu.Unlock()
	defer func() {
		c.sseMu.Lock()
		delete(c.sseCalls, id)
		c.sseMu.Unlock()
	}()
	req, _, err := c.newPost(ctx, u.String(), requestBody(id, method, params), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	// What the POST answers besides its status is not the response.
	text, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return statusError(resp.StatusCode, text, method, strconv.AppendInt(nil, id, 10), c.scrub)
	}
	select {
	case m := <-answer:
		return m, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-c.closed:
		return nil, c.closedErr()
	}
}

// streamResponse hands a response that came on a legacy SSE upstream's
// stream to the exchangeSSE awaiting it; any other response goes on to
// mcp-go (the answer to initialize).
func (c *remoteConn) streamResponse(m *jsonrpc.Message) bool {
	if !c.sse {
		return false
	}
	key, ok := sentID(m.ID)
	if !ok {
		return false
	}
	c.sseMu.Lock()
	answer := c.sseCalls[key]
	delete(c.sseCalls, key)
	c.sseMu.Unlock()
	if answer == nil {
		return false
	}
	answer <- m // its one answer, into a buffer of one
	return true
}

// exchange sends the request id and returns its response. ctx bounds all of
// it, and cancel ends ctx; header, when not nil, is the request's own (it is
// written to).
func (c *remoteConn) exchange(ctx context.Context, cancel context.CancelCauseFunc, id int64, method string, params json.RawMessage, header http.Header) (*jsonrpc.Message, error) {
	req, session, err := c.newPost(ctx, c.url, requestBody(id, method, params), header)
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
		if session != "" && sessionLost(resp.StatusCode, body) {
			err := fmt.Errorf("it no longer knows the session (HTTP %d to %s); connecting again", resp.StatusCode, method)
			go c.fail(fmt.Errorf("server %q: %w", c.server, err))
			return nil, err
		}
		return statusError(resp.StatusCode, body, method, want, c.scrub)
	}
	if resp.StatusCode == http.StatusAccepted && resp.Header.Get("Content-Type") == "" {
		// 202 acknowledges a notification or a response; a request is
		// answered with its response, on a JSON body or an event stream.
		return nil, fmt.Errorf("it answered %s with HTTP 202 Accepted and no response; a server answers every request (check that url is the server's MCP endpoint)", method)
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		data, err := readJSONBody(resp)
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
// the messages in it would be taken on the request's event stream: its
// notifications and requests go where the stream's would (eventTap), and
// the response whose id is want is returned.
func (c *remoteConn) batchResponse(ctx context.Context, data []byte, method string, want []byte) (*jsonrpc.Message, error) {
	elems, err := splitBatch(data)
	if err != nil {
		return nil, fmt.Errorf("it answered %s with a JSON-RPC batch that cannot be taken: %w", method, err)
	}
	var answer *jsonrpc.Message
	for _, elem := range elems {
		if isBatch(elem) {
			c.streamRefused(elem, errNestedBatch)
			continue
		}
		m := eventMessage(elem)
		switch {
		case m == nil:
		case m.IsNotification():
			c.streamNotified(Notification{Method: m.Method, Params: m.Params, flight: flightOf(ctx)})
		case m.IsRequest():
			c.streamRequested(ctx, m)
		case answer == nil && bytes.Equal(m.ID, want):
			answer = m
		}
	}
	if answer == nil {
		return nil, fmt.Errorf("it answered %s (id %s) with a JSON-RPC batch that holds no response to it", method, want)
	}
	return answer, nil
}

// preallocated bounds the declared length a JSON body is read into at once.
const preallocated = 1 << 20

// readJSONBody reads a response body whole: into one buffer of the declared
// length when there is one (the transport ends the body there), else as it
// comes. The body under it bounds its size (limitedBody).
func readJSONBody(resp *http.Response) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > preallocated {
		return io.ReadAll(resp.Body)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, data); err != nil {
		return nil, err
	}
	return data, nil
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
	version := c.protocolVersion()
	if version != "" {
		h.Set(transport.HeaderKeyProtocolVersion, version)
	}
	if s := c.t.GetSessionId(); s != "" && !mcp.IsModernProtocol(version) {
		session = s
		h.Set(transport.HeaderKeySessionID, s)
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

// streamOpened watches the GET streams for the session's end: a GET on a
// session whose stream the upstream once opened, answered as sessionLost
// has it, means the upstream forgot the session (it restarted), and the
// connection fails so that the pool connects again. Left alone, mcp-go
// would ask again every second until pings noticed. A GET refused on a
// session that never had a stream only means there is no stream to have.
func (c *remoteConn) streamOpened(req *http.Request, resp *http.Response) {
	session := req.Header.Get(transport.HeaderKeySessionID)
	if session == "" {
		return
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
			c.streamSession.Store(&session)
		}
		return
	case http.StatusNotFound, http.StatusBadRequest:
	default:
		return
	}
	if opened := c.streamSession.Load(); opened == nil || *opened != session {
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if sessionLost(resp.StatusCode, body) {
		go c.fail(fmt.Errorf("server %q: it no longer knows the session (HTTP %d to the GET stream); connecting again", c.server, resp.StatusCode))
	}
}

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

// resumeCursor is what resuming a stream needs: the id of the last event
// dispatched, and the reconnection time the upstream asked for.
type resumeCursor struct {
	lastID   string
	retry    time.Duration
	hasRetry bool
}

// streamedResponse reads an event stream until the response whose id is
// want, resuming it while the upstream ends it first. Once the response is
// in, the exchange is cancelled before its stream is closed: on HTTP/2,
// closing a stream still open could otherwise wait on the connection.
func (c *remoteConn) streamedResponse(ctx context.Context, cancel context.CancelCauseFunc, body io.ReadCloser, method string, want []byte) (*jsonrpc.Message, error) {
	var cursor resumeCursor
	for {
		m, err := readStreamedResponse(body, &cursor, want)
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
		if err != io.EOF || cursor.lastID == "" || mcp.IsModernProtocol(c.protocolVersion()) {
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

// readStreamedResponse reads events until one carries the response want
// (returned) or the stream ends (io.EOF) or fails. Events are read as the
// SSE specification has them: lines end at "\n" ("\r" trimmed), an event at
// a blank line, data lines are joined with "\n"; an event's id counts once
// the event is dispatched. What the upstream sends besides its response was
// taken out of the stream below (eventTap); what is left is let be.
func readStreamedResponse(body io.Reader, cursor *resumeCursor, want []byte) (*jsonrpc.Message, error) {
	r := bufio.NewReader(body)
	var data []byte
	var id string
	hasID := false
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: the event under it is bounded (limitedBody).
			whole := bytes.Clone(line)
			for err == bufio.ErrBufferFull {
				line, err = r.ReadSlice('\n')
				whole = append(whole, line...)
			}
			line = whole
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		text := bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) > 0 && len(text) == 0 && err == nil: // a blank line ends the event
			if hasID {
				cursor.lastID, hasID = id, false
			}
			if m, err := responseIn(data, want); m != nil || err != nil {
				return m, err
			}
			data = data[:0]
		case bytes.HasPrefix(text, []byte("data:")):
			v := bytes.TrimPrefix(text[len("data:"):], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		case bytes.HasPrefix(text, []byte("id:")):
			if v := bytes.TrimPrefix(text[len("id:"):], []byte(" ")); bytes.IndexByte(v, 0) < 0 {
				id, hasID = string(v), true
			}
		case bytes.HasPrefix(text, []byte("retry:")):
			v := string(bytes.TrimPrefix(text[len("retry:"):], []byte(" ")))
			if ms, perr := strconv.ParseUint(v, 10, 31); perr == nil && strings.Trim(v, "0123456789") == "" {
				cursor.retry, cursor.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
		if err == io.EOF {
			// An event the stream ends in the middle of still counts, as
			// it does for mcp-go; its id does not.
			if m, err := responseIn(data, want); m != nil || err != nil {
				return m, err
			}
			return nil, io.EOF
		}
	}
}

// responseIn returns the response want if data is it. When data is meant
// as that response but cannot be read (see jsonrpc.AnswerID), it says why,
// so that the call fails now rather than wait for the stream to end.
func responseIn(data, want []byte) (*jsonrpc.Message, error) {
	if len(data) == 0 {
		return nil, nil
	}
	m, err := jsonrpc.Decode(data)
	if err != nil {
		if bytes.Equal(jsonrpc.AnswerID(data), want) {
			return nil, &malformedResponse{err: err}
		}
		return nil, nil
	}
	if !m.IsResponse() || !bytes.Equal(m.ID, want) {
		return nil, nil
	}
	return m, nil
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
func (c *remoteConn) resume(ctx context.Context, cursor *resumeCursor, method string) (io.ReadCloser, error) {
	delay := defaultResumeDelay
	if cursor.hasRetry {
		delay = max(cursor.retry, minResumeDelay)
	}
	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return nil, context.Cause(ctx)
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

// mediaType is a Content-Type's media type, lower case, without parameters.
func mediaType(contentType string) string {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}
