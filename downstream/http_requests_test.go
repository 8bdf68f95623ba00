package downstream

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// initializeCaps opens a session declaring clientCaps and returns its id and
// the Session the Handler got.
func (s *httpServer) initializeCaps(t *testing.T) (string, Session) {
	t.Helper()
	resp := s.post(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+clientCaps+`,"clientInfo":{"name":"test","version":"1"}}}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	id := resp.Header.Get(headerSessionID)
	require.NotEmpty(t, id)
	return id, recv(t, s.h.opened)
}

// answer posts a client's response in session id; it is accepted.
func (s *httpServer) answer(t *testing.T, id, body string) {
	t.Helper()
	resp := s.sessionPost(t, id, body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

type requestResult struct {
	msg *jsonrpc.Message
	err error
}

// request runs sess.Request on its own goroutine.
func request(ctx context.Context, sess Session, method string) <-chan requestResult {
	done := make(chan requestResult, 1)
	go func() {
		m, err := sess.Request(ctx, method, nil)
		done <- requestResult{m, err}
	}()
	return done
}

func TestHTTPAskOnThePostStream(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	s := serveHTTP(t, h, HTTPOptions{})
	id, _ := s.initializeCaps(t)

	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":5,"method":"ask"}`)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"), "the response switched to SSE")
	events := newSSE(resp.Body)
	ask, err := events.next()
	require.NoError(t, err)
	assert.Equal(t, "sampling/createMessage", ask.Method)
	assert.JSONEq(t, `"s-1"`, string(ask.ID))
	assert.JSONEq(t, `{"messages":[],"maxTokens":5}`, string(ask.Params))

	// The answer is a POST of its own, while the request's stream is open.
	s.answer(t, id, `{"jsonrpc":"2.0","id":"s-1","result":{"role":"assistant","content":{"type":"text","text":"hi"}}}`)
	final, err := events.next()
	require.NoError(t, err)
	assert.JSONEq(t, `5`, string(final.ID))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"s-1","result":{"role":"assistant","content":{"type":"text","text":"hi"}}}`, string(final.Result))
	assert.Empty(t, h.notified, "client responses never reach Notified")
}

func TestHTTPAskFromAClientWithoutSSE(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	s := serveHTTP(t, h, HTTPOptions{})
	id, _ := s.initializeCaps(t)
	jsonOnly := map[string]string{headerSessionID: id, "Accept": "application/json"}

	// No stream at all: Ask fails at once.
	resp := s.post(t, `{"jsonrpc":"2.0","id":5,"method":"ask"}`, jsonOnly)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, string(readMessage(t, resp).Result), ErrNoStream.Error())

	// With a GET stream, the request goes there; the response stays JSON.
	stream, _ := s.openStream(t, id)
	require.Equal(t, http.StatusOK, stream.StatusCode)
	done := make(chan *http.Response, 1)
	go func() { done <- s.post(t, `{"jsonrpc":"2.0","id":6,"method":"ask"}`, jsonOnly) }()
	ask, err := newSSE(stream.Body).next()
	require.NoError(t, err)
	assert.Equal(t, "sampling/createMessage", ask.Method)
	s.answer(t, id, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"model":"m"}}`)
	resp = recv(t, done)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	msg := readMessage(t, resp)
	assert.JSONEq(t, `6`, string(msg.ID))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"model":"m"}}`, string(msg.Result))
}

func TestHTTPSessionRequestOnTheGetStream(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id, sess := s.initializeCaps(t)

	// Without a GET stream nothing can carry it: it fails at once.
	start := time.Now()
	_, err := sess.Request(context.Background(), "roots/list", nil)
	assert.ErrorIs(t, err, ErrNoStream)
	assert.Less(t, time.Since(start), time.Second)

	stream, _ := s.openStream(t, id)
	require.Equal(t, http.StatusOK, stream.StatusCode)
	done := request(context.Background(), sess, "roots/list")
	req, err := newSSE(stream.Body).next()
	require.NoError(t, err)
	assert.Equal(t, "roots/list", req.Method)
	s.answer(t, id, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32601,"message":"Client does not have roots capability"}}`)
	got := recv(t, done)
	require.NoError(t, got.err)
	assert.JSONEq(t, string(req.ID), string(got.msg.ID))
	assert.Equal(t, -32601, got.msg.Error.Code)
	assert.Equal(t, "Client does not have roots capability", got.msg.Error.Message)
	assert.Empty(t, h.notified, "client responses never reach Notified")
}

func TestHTTPRequestTimeoutCancelsIt(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 50*time.Millisecond)
	})
	s := serveHTTP(t, h, HTTPOptions{})
	id, sess := s.initializeCaps(t)

	// Session.Request: the notice follows on the GET stream.
	stream, _ := s.openStream(t, id)
	get := newSSE(stream.Body)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := request(ctx, sess, "elicitation/create")
	req, err := get.next()
	require.NoError(t, err)
	note, err := get.next()
	require.NoError(t, err)
	assert.Equal(t, "notifications/cancelled", note.Method)
	assert.JSONEq(t, string(req.ID), string(members(note.Params)["requestId"]))
	assert.ErrorIs(t, recv(t, done).err, context.DeadlineExceeded)

	// Ask: the notice follows on the POST's stream, before its response.
	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":7,"method":"ask"}`)
	defer resp.Body.Close()
	post := newSSE(resp.Body)
	ask, err := post.next()
	require.NoError(t, err)
	note, err = post.next()
	require.NoError(t, err)
	assert.Equal(t, "notifications/cancelled", note.Method)
	assert.JSONEq(t, string(ask.ID), string(members(note.Params)["requestId"]))
	final, err := post.next()
	require.NoError(t, err)
	assert.JSONEq(t, `7`, string(final.ID))
	assert.Contains(t, string(final.Result), "deadline exceeded")

	// Late and unknown answers are accepted and dropped.
	s.answer(t, id, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"action":"accept"}}`)
	s.answer(t, id, `{"jsonrpc":"2.0","id":"s-42","result":{}}`)
	s.answer(t, id, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
	assert.Empty(t, h.notified, "client responses never reach Notified")
}

func TestHTTPAskEndsWithItsRequest(t *testing.T) {
	h := newHTTPFake()
	h.handle = asking(nil)
	s := serveHTTP(t, h, HTTPOptions{})
	id, _ := s.initializeCaps(t)
	stream, _ := s.openStream(t, id)

	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":"call","method":"ask"}`)
	defer resp.Body.Close()
	post := newSSE(resp.Body)
	ask, err := post.next()
	require.NoError(t, err)
	s.answer(t, id, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call"}}`)
	// The request's stream ends without a response; the notice for the
	// request it made goes on whichever stream is still open.
	var note *jsonrpc.Message
	if m, err := post.next(); err == nil {
		note = m
	} else {
		note, err = newSSE(stream.Body).next()
		require.NoError(t, err)
	}
	assert.Equal(t, "notifications/cancelled", note.Method)
	assert.JSONEq(t, string(ask.ID), string(members(note.Params)["requestId"]))
}

func TestHTTPPendingRequestsAreBounded(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id, sess := s.initializeCaps(t)
	stream, _ := s.openStream(t, id)
	get := newSSE(stream.Body)

	ctx, cancel := context.WithCancel(context.Background())
	var pending []<-chan requestResult
	for range MaxPendingRequests {
		pending = append(pending, request(ctx, sess, "roots/list"))
	}
	ids := map[string]bool{}
	for range MaxPendingRequests {
		m, err := get.next()
		require.NoError(t, err)
		ids[string(m.ID)] = true
	}
	assert.Len(t, ids, MaxPendingRequests, "every id is unique")

	start := time.Now()
	_, err := sess.Request(context.Background(), "roots/list", nil)
	assert.ErrorIs(t, err, ErrTooManyRequests)
	assert.Less(t, time.Since(start), time.Second, "over the bound fails at once")

	cancel()
	for _, p := range pending {
		assert.ErrorIs(t, recv(t, p).err, context.Canceled)
	}
}

func TestHTTPClientCapabilities(t *testing.T) {
	h, seen := seeingFake()
	s := serveHTTP(t, h, HTTPOptions{})

	id, sess := s.initializeCaps(t)
	init := recv(t, seen)
	assert.JSONEq(t, clientCaps, string(init.ClientCapabilities))
	assert.Nil(t, init.Ask, "no requests before the session is initialized")
	assert.JSONEq(t, clientCaps, string(sess.ClientCapabilities()))

	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	readMessage(t, resp)
	req := recv(t, seen)
	assert.JSONEq(t, clientCaps, string(req.ClientCapabilities))
	assert.JSONEq(t, clientCaps, string(req.Session.ClientCapabilities()))
	assert.NotNil(t, req.Ask)

	// A session that declared none has none.
	resp = s.post(t, initializeBody, nil)
	readMessage(t, resp)
	recv(t, seen)
	assert.JSONEq(t, `{}`, string(recv(t, h.opened).ClientCapabilities()))

	// Sessionless: the request's _meta capabilities, and no Ask.
	resp = s.post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`,
		modernHeaders("tools/list", ""))
	readMessage(t, resp)
	req = recv(t, seen)
	assert.Nil(t, req.Session)
	assert.Nil(t, req.Ask)
	assert.JSONEq(t, `{"sampling":{}}`, string(req.ClientCapabilities))
}

func TestHTTPSessionEndFailsPendingRequests(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id, sess := s.initializeCaps(t)
	stream, _ := s.openStream(t, id)

	done := request(context.Background(), sess, "roots/list")
	_, err := newSSE(stream.Body).next()
	require.NoError(t, err)
	resp := s.request(t, http.MethodDelete, "", map[string]string{headerSessionID: id})
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.ErrorIs(t, recv(t, done).err, ErrSessionGone)
	_, err = sess.Request(context.Background(), "roots/list", nil)
	assert.ErrorIs(t, err, ErrSessionGone)
}
