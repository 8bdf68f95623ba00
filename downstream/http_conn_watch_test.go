package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"

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
