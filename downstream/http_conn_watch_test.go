package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// connWatchFake answers "hold" once released (or, cancelled, with nothing,
// telling causes why), after a progress notification when asked for one,
// and anything else at once.
func connWatchFake() (h *httpFake, started chan string, causes chan error, release chan struct{}) {
	h = newHTTPFake()
	started, causes, release = make(chan string, 8), make(chan error, 8), make(chan struct{})
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		switch req.Msg.Method {
		case "initialize":
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-06-18"}`)}
		case "hold":
		default:
			return &jsonrpc.Message{Result: json.RawMessage(`{"ok":true}`)}
		}
		if string(req.Msg.ID) == `"progress"` {
			req.Send(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":1,"progress":1}`)})
		}
		started <- string(req.Msg.ID)
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return nil
		case <-release:
			return &jsonrpc.Message{Result: json.RawMessage(`{"held":true}`)}
		}
	}
	return h, started, causes, release
}

// Requests pipelined on one connection: the next one's bytes arriving
// while the first is served do not end the first, and both are answered
// in turn, the connection kept.
func TestHTTPPipelinedRequestDoesNotEndTheOneServed(t *testing.T) {
	h, started, causes, release := connWatchFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)
	c := s.dial(t)
	br := bufio.NewReader(c)
	hdr := "Accept: application/json, text/event-stream\r\n" + headerSessionID + ": " + id + "\r\n"
	first := `{"jsonrpc":"2.0","id":1,"method":"hold"}`
	second := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	s.rawPost(t, c, hdr+"Content-Length: "+strconv.Itoa(len(first))+"\r\n", first)
	assert.Equal(t, "1", recv(t, started))
	s.rawPost(t, c, hdr+"Content-Length: "+strconv.Itoa(len(second))+"\r\n", second)
	// A third request on another connection, answered, shows the server
	// has gone on serving while the pipelined bytes came.
	readMessage(t, s.sessionPost(t, id, `{"jsonrpc":"2.0","id":3,"method":"ping"}`))
	close(release)

	resp := readResponse(t, c, br)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	msg := readMessage(t, resp)
	assert.JSONEq(t, `1`, string(msg.ID))
	assert.JSONEq(t, `{"held":true}`, string(msg.Result), "the first request ran whole")
	resp = readResponse(t, c, br)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `2`, string(readMessage(t, resp).ID))
	select {
	case err := <-causes:
		t.Fatalf("a request was ended: %v", err)
	default:
	}
}

// A client that leaves a request answered as a stream of events (its
// progress first) ends the request, as one answered by a JSON body.
func TestHTTPClientLeavingEndsItsStream(t *testing.T) {
	h, started, causes, _ := connWatchFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)
	c := s.dial(t)
	br := bufio.NewReader(c)
	body := `{"jsonrpc":"2.0","id":"progress","method":"hold","params":{"_meta":{"progressToken":1}}}`
	s.rawPost(t, c, "Accept: application/json, text/event-stream\r\n"+headerSessionID+": "+id+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n", body)
	assert.Equal(t, `"progress"`, recv(t, started))
	resp := readResponse(t, c, br)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	m, err := newSSE(resp.Body).next()
	require.NoError(t, err)
	assert.Equal(t, "notifications/progress", m.Method)
	require.NoError(t, c.(*net.TCPConn).Close())
	assert.ErrorIs(t, recv(t, causes), context.Canceled)
}

// A handler in front of the endpoint that narrows a request's context, as
// a handler timeout does, narrows the request's: its cancellation ends the
// request with its cause, and its deadline is the request's. Only a
// request whose HTTP context carries nothing but values over the one
// net/http made is left to its connection to end.
func TestHTTPRequestKeepsTheContextInFrontOfIt(t *testing.T) {
	errCut := errors.New("cut short in front of the endpoint")
	deadline := time.Now().Add(time.Hour).Round(0)
	cuts := make(chan context.CancelCauseFunc, 1)
	front := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			switch r.Header.Get("X-Front") {
			case "cancel":
				var cut context.CancelCauseFunc
				ctx, cut = context.WithCancelCause(ctx)
				defer cut(nil)
				cuts <- cut
			case "deadline":
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			case "value":
				ctx = context.WithValue(ctx, frontKey{}, true)
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	h, started, causes, release := connWatchFake()
	deadlines := make(chan time.Time, 4)
	hold := h.handle
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method != "initialize" {
			dl, _ := ctx.Deadline()
			deadlines <- dl
		}
		return hold(ctx, req)
	}
	s := serveBehind(t, h, HTTPOptions{}, front)
	id := s.initialize(t)
	post := func(front, body string) <-chan *http.Response {
		req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(headerSessionID, id)
		req.Header.Set("X-Front", front)
		answered := make(chan *http.Response, 1)
		go func() {
			resp, err := s.client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			answered <- resp
		}()
		return answered
	}

	t.Run("cancel", func(t *testing.T) {
		answered := post("cancel", `{"jsonrpc":"2.0","id":1,"method":"hold"}`)
		assert.Equal(t, "1", recv(t, started))
		assert.True(t, recv(t, deadlines).IsZero())
		recv(t, cuts)(errCut)
		assert.ErrorIs(t, recv(t, causes), errCut)
		recv(t, answered)
	})
	t.Run("deadline", func(t *testing.T) {
		answered := post("deadline", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		assert.True(t, deadline.Equal(recv(t, deadlines)), "the request's deadline is the one in front of it")
		require.Equal(t, http.StatusOK, recv(t, answered).StatusCode)
	})
	t.Run("value", func(t *testing.T) {
		// A context that only adds values is left to the connection: the
		// client leaving ends the request, and nothing else does.
		c := s.dial(t)
		body := `{"jsonrpc":"2.0","id":3,"method":"hold"}`
		s.rawPost(t, c, "Accept: application/json, text/event-stream\r\nX-Front: value\r\n"+headerSessionID+": "+id+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n", body)
		assert.Equal(t, "3", recv(t, started))
		assert.True(t, recv(t, deadlines).IsZero())
		require.NoError(t, c.Close())
		assert.ErrorIs(t, recv(t, causes), context.Canceled)
	})
	close(release)
	select {
	case err := <-causes:
		t.Fatalf("a request was ended twice: %v", err)
	default:
	}
}

type frontKey struct{}
