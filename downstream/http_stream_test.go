package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

func progress(n int) *jsonrpc.Message {
	m, _ := jsonrpc.Notification("notifications/progress", map[string]any{"progressToken": "p", "progress": n})
	return m
}

func TestHTTPSendStreamsBeforeTheResponse(t *testing.T) {
	sent := make(chan []bool, 1)
	h := newHTTPFake()
	h.handle = func(_ context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		var ok []bool
		for i := 1; i <= 3; i++ {
			ok = append(ok, req.Send(progress(i)))
		}
		sent <- ok
		// A pretty-printed raw result: its line breaks must survive SSE framing.
		return &jsonrpc.Message{Result: json.RawMessage("{\n  \"done\": true,\r\n  \"text\": \"a\\nb\"\n}")}
	}
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)

	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p"}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	assert.Equal(t, []bool{true, true, true}, recv(t, sent))
	events := newSSE(resp.Body)
	defer resp.Body.Close()
	for i := 1; i <= 3; i++ {
		m, err := events.next()
		require.NoError(t, err)
		assert.Equal(t, "notifications/progress", m.Method)
		assert.JSONEq(t, `{"progressToken":"p","progress":`+itoa(i)+`}`, string(m.Params))
	}
	m, err := events.next()
	require.NoError(t, err)
	assert.JSONEq(t, `5`, string(m.ID))
	assert.JSONEq(t, `{"done":true,"text":"a\nb"}`, string(m.Result))
	_, err = events.next()
	assert.ErrorIs(t, err, io.EOF, "the response ends the stream")

	// A client that accepts only JSON gets no stream: Send reports false.
	resp = s.post(t, `{"jsonrpc":"2.0","id":6,"method":"tools/call"}`, map[string]string{headerSessionID: id, "Accept": "application/json"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, []bool{false, false, false}, recv(t, sent))
	assert.JSONEq(t, `6`, string(readMessage(t, resp).ID))

	// One that accepts only a stream gets the response as an event.
	resp = s.post(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call"}`, map[string]string{headerSessionID: id, "Accept": "text/event-stream"})
	recv(t, sent)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events = newSSE(resp.Body)
	defer resp.Body.Close()
	for range 3 {
		_, err = events.next()
		require.NoError(t, err)
	}
	m, err = events.next()
	require.NoError(t, err)
	assert.JSONEq(t, `8`, string(m.ID))
}

// TestHTTPSendRacingTheResponse: messages that another goroutine sends while
// the handler returns either go out ahead of the response, in order, or not
// at all (Send reports which); the response always comes whole and last. The
// request's goroutine and a writer it started never write at once (-race).
func TestHTTPSendRacingTheResponse(t *testing.T) {
	accepted := make(chan int, 1)
	h := newHTTPFake()
	h.handle = func(_ context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		started := make(chan struct{})
		go func() {
			n := 0
			for i := 1; i <= 50; i++ {
				if i == 2 {
					close(started)
				}
				if req.Send(progress(i)) {
					n = i
				} else {
					break
				}
			}
			accepted <- n
		}()
		<-started // the handler returns while messages are still being sent
		return &jsonrpc.Message{Result: json.RawMessage(`{"done":true}`)}
	}
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)
	for round := range 40 {
		resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		n := recv(t, accepted)
		require.Positive(t, n, "round %d: the first message was sent before the handler returned", round)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		events := newSSE(resp.Body)
		var got []int
		for {
			m, err := events.next()
			require.NoError(t, err, "round %d", round)
			if m.Method == "" {
				assert.JSONEq(t, `7`, string(m.ID))
				assert.JSONEq(t, `{"done":true}`, string(m.Result))
				break
			}
			var p struct {
				Progress int `json:"progress"`
			}
			require.NoError(t, json.Unmarshal(m.Params, &p))
			got = append(got, p.Progress)
		}
		_, err := events.next()
		assert.ErrorIs(t, err, io.EOF, "round %d: the response ends the stream", round)
		resp.Body.Close()
		// Every message Send accepted went out, in order, before the response.
		require.Len(t, got, n, "round %d: %v", round, got)
		for i, p := range got {
			require.Equal(t, i+1, p, "round %d: %v", round, got)
		}
	}
}

func TestHTTPNoResponseIsAccepted(t *testing.T) {
	h := newHTTPFake()
	h.handle = func(context.Context, *Request) *jsonrpc.Message { return nil }
	s := serveHTTP(t, h, HTTPOptions{})
	resp := s.post(t, modernBody("tools/list", "2026-07-28", ""), modernHeaders("tools/list", ""))
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Empty(t, body)
}

func TestHTTPHeartbeatsKeepALongRequestOpen(t *testing.T) {
	h := newHTTPFake()
	release := make(chan struct{})
	h.handle = func(context.Context, *Request) *jsonrpc.Message {
		<-release
		return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
	}
	s := serveHTTP(t, h, HTTPOptions{Heartbeat: 10 * time.Millisecond})
	resp := s.post(t, modernBody("tools/list", "2026-07-28", ""), modernHeaders("tools/list", ""))
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, ": keep-alive\n", line)
	close(release)
	m, err := (&sse{r: br}).next()
	require.NoError(t, err)
	assert.JSONEq(t, `7`, string(m.ID))
}

// openStream opens the session's GET stream; the response headers arrive
// once the stream is registered.
func (s *httpServer) openStream(t *testing.T, id string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	require.NoError(t, err)
	req.Header.Set(headerSessionID, id)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, cancel
}

func TestHTTPGetStreamCarriesNotify(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{Heartbeat: 5 * time.Millisecond})
	id := s.initialize(t)
	sess := recv(t, h.opened)
	assert.False(t, sess.Notify(progress(0)), "no stream open")

	resp, cancel := s.openStream(t, id)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	for i := 1; i <= 3; i++ {
		assert.True(t, sess.Notify(progress(i)))
	}
	events := newSSE(resp.Body)
	for i := 1; i <= 3; i++ {
		m, err := events.next()
		require.NoError(t, err)
		assert.JSONEq(t, `{"progressToken":"p","progress":`+itoa(i)+`}`, string(m.Params))
	}
	// With nothing to send, the stream carries heartbeats.
	for events.comments == 0 {
		line, err := events.r.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, ":") {
			events.comments++
		}
	}

	// One stream per session.
	second := s.request(t, http.MethodGet, "", map[string]string{headerSessionID: id, "Accept": "text/event-stream"})
	requireRefused(t, second, http.StatusConflict, jsonrpc.CodeInvalidRequest, "already has a GET stream")

	// Once the client leaves, Notify fails and the client may come back.
	cancel()
	eventually(t, func() bool { return !sess.Notify(progress(9)) }, "the stream to close")
	resp, _ = s.openStream(t, id)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, sess.Notify(progress(4)))
	m, err := newSSE(resp.Body).next()
	require.NoError(t, err)
	assert.JSONEq(t, `{"progressToken":"p","progress":4}`, string(m.Params))
}

func TestHTTPGetClientThatNeverReadsDoesNotBlockNotify(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{QueueSize: 4, WriteTimeout: 100 * time.Millisecond})
	id := s.initialize(t)
	sess := recv(t, h.opened)

	// A client that reads the stream's headers and nothing more.
	c := s.dial(t)
	_, err := io.WriteString(c, "GET /mcp HTTP/1.1\r\nHost: "+s.addr+"\r\nAccept: text/event-stream\r\n"+headerSessionID+": "+id+"\r\n\r\n")
	require.NoError(t, err)
	resp := readResponse(t, c, bufio.NewReader(c))
	require.Equal(t, http.StatusOK, resp.StatusCode)

	big, _ := jsonrpc.Notification("notifications/message", map[string]string{"data": strings.Repeat("x", 64<<10)})
	var slowest time.Duration
	refused := false
	for i := 0; i < 10000 && !refused; i++ {
		start := time.Now()
		refused = !sess.Notify(big)
		slowest = max(slowest, time.Since(start))
	}
	assert.True(t, refused, "the queue overflowed")
	assert.Less(t, slowest, 50*time.Millisecond, "Notify never waits for the client")

	// The stream is closed, freeing the session for a new one.
	eventually(t, func() bool {
		resp := s.request(t, http.MethodGet, "", map[string]string{headerSessionID: id, "Accept": "text/event-stream"})
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the stuck stream to be closed")
	assert.Equal(t, 1, s.tr.Sessions())
}

// holdingFake is a handler that answers initialize and holds every other
// request until its context ends, saying on started that one came and on
// cause why it ended; it answers those with nothing.
func holdingFake() (h *httpFake, started chan struct{}, cause chan error) {
	started = make(chan struct{}, 1)
	cause = make(chan error, 1)
	h = newHTTPFake()
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		started <- struct{}{}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	}
	return h, started, cause
}

func TestHTTPCancelledNotificationCancelsTheRequest(t *testing.T) {
	h, started, cause := holdingFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)

	status := make(chan int, 1)
	go func() {
		resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"slow"}}`)
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	recv(t, started)

	// The same id again while it is in flight is refused.
	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"slow"}}`)
	requireRefused(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, `request id "call-7" is already in flight`)

	resp = s.sessionPost(t, id, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-7","reason":"user"}}`)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	resp.Body.Close()
	assert.ErrorIs(t, recv(t, cause), errCancelled)
	assert.Equal(t, http.StatusAccepted, recv(t, status), "a cancelled request gets no response")
	assert.Empty(t, h.notified, "notifications/cancelled is applied, not passed on")
}

func TestHTTPClientLeavingCancelsTheRequest(t *testing.T) {
	started := make(chan struct{}, 1)
	ended := make(chan struct{})
	h := newHTTPFake()
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		started <- struct{}{}
		<-ctx.Done()
		close(ended)
		return nil
	}
	s := serveHTTP(t, h, HTTPOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(modernBody("tools/list", "2026-07-28", "")))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range modernHeaders("tools/list", "") {
		req.Header.Set(k, v)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.client.Do(req)
		errc <- err
	}()
	recv(t, started)
	cancel()
	recv(t, ended)
	assert.Error(t, recv(t, errc))
}

func TestHTTPShutdownEndsEverything(t *testing.T) {
	h, started, cause := holdingFake()
	s := serveHTTP(t, h, HTTPOptions{})
	a, b := s.initialize(t), s.initialize(t)
	stream, _ := s.openStream(t, a)
	require.Equal(t, http.StatusOK, stream.StatusCode)
	status := make(chan int, 1)
	go func() {
		resp := s.sessionPost(t, b, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`)
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	recv(t, started)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.tr.Shutdown(ctx))
	closed := map[string]bool{recv(t, h.closed).Key(): true, recv(t, h.closed).Key(): true}
	assert.Equal(t, map[string]bool{a: true, b: true}, closed)
	assert.Zero(t, s.tr.Sessions())
	assert.ErrorIs(t, recv(t, cause), errShutdown)
	assert.Equal(t, http.StatusServiceUnavailable, recv(t, status))
	_, err := io.ReadAll(stream.Body)
	assert.NoError(t, err, "the GET stream ended")
	assert.NoError(t, s.serveResult(t), "Serve returns nil after Shutdown")
}

func TestAppendEvent(t *testing.T) {
	m := &jsonrpc.Message{ID: json.RawMessage(`1`), Result: json.RawMessage("{\"a\":\r\n1,\r\"b\":\n2}")}
	got := string(appendEvent(nil, m))
	assert.Equal(t, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\ndata: 1,\ndata: \"b\":\ndata: 2}}\n\n", got)
	back, err := newSSE(strings.NewReader(got)).next()
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1,"b":2}`, string(back.Result))
}

func TestHTTPStreamClientThatStopsReadingIsCut(t *testing.T) {
	cause := make(chan error, 1)
	h := newHTTPFake()
	big, _ := jsonrpc.Notification("notifications/message", map[string]string{"data": strings.Repeat("x", 64<<10)})
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		for ctx.Err() == nil {
			if !req.Send(big) {
				select { // the queue is full: wait a little for the writer
				case <-ctx.Done():
				case <-time.After(time.Millisecond):
				}
			}
		}
		cause <- context.Cause(ctx)
		return nil
	}
	s := serveHTTP(t, h, HTTPOptions{QueueSize: 4, WriteTimeout: 100 * time.Millisecond})

	// A client that reads the stream's headers and nothing more.
	c := s.dial(t)
	body := modernBody("tools/list", "2026-07-28", "")
	hdr := "Content-Length: " + itoa(len(body)) + "\r\nAccept: application/json, text/event-stream\r\n"
	for k, v := range modernHeaders("tools/list", "") {
		hdr += k + ": " + v + "\r\n"
	}
	s.rawPost(t, c, hdr, body)
	resp := readResponse(t, c, bufio.NewReader(c))
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	// net/http may cancel the request's context on the failed write before
	// the transport does: either way the request ends.
	err := recv(t, cause)
	assert.True(t, errors.Is(err, errWriteFailed) || errors.Is(err, context.Canceled), "cause %v", err)
}

func TestHTTPShutdownIsBoundedByItsContext(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	h := newHTTPFake()
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		started <- struct{}{}
		<-release // ignores ctx
		return nil
	}
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)
	go func() {
		resp, err := s.client.Do(func() *http.Request {
			req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(headerSessionID, id)
			return req
		}())
		if err == nil {
			resp.Body.Close()
		}
	}()
	recv(t, started)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.tr.Shutdown(ctx), context.DeadlineExceeded)
	select {
	case <-h.closed:
		t.Fatal("SessionClosed came while a Handle of the session was running")
	default:
	}
	close(release)
	assert.Equal(t, id, recv(t, h.closed).Key(), "SessionClosed once it returned")
}

// Every request still running after a heartbeat interval gets its
// heartbeat, however many wait together, and so does one that begins after
// they all ended (the transport's one waiting goroutine starts again).
func TestHTTPHeartbeatsReachEveryLongRequest(t *testing.T) {
	h := newHTTPFake()
	release := make(chan struct{})
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
	}
	s := serveHTTP(t, h, HTTPOptions{Heartbeat: 10 * time.Millisecond})
	beaten := func(n int) {
		resps := make(chan *http.Response, n)
		for range n {
			go func() {
				resps <- s.post(t, modernBody("tools/list", "2026-07-28", ""), modernHeaders("tools/list", ""))
			}()
		}
		var readers []*bufio.Reader
		for range n {
			resp := recv(t, resps)
			t.Cleanup(func() { resp.Body.Close() })
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, ": keep-alive\n", line)
			readers = append(readers, br)
		}
		for range n {
			release <- struct{}{} // each to one request
		}
		for _, br := range readers {
			m, err := (&sse{r: br}).next()
			require.NoError(t, err)
			assert.JSONEq(t, `7`, string(m.ID))
		}
	}
	beaten(3)
	require.Eventually(t, func() bool { return s.tr.InFlight() == 0 }, 5*time.Second, time.Millisecond)
	beaten(1)
}
