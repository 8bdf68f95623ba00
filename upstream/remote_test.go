package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// fakeRemote is a small streamable-HTTP MCP server. It answers initialize,
// tools/list and pings itself and hands tools/call to call, which writes the
// whole HTTP response. Notifications are handed to notified, and the
// client's answers to its requests to answered.
type fakeRemote struct {
	call     func(w http.ResponseWriter, r *http.Request, req *jsonrpc.Message)
	notified func(w http.ResponseWriter, r *http.Request, n *jsonrpc.Message)
	answered func(m *jsonrpc.Message)
}

func (f *fakeRemote) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed) // no GET stream
		return
	}
	msg, ok := decodePost(w, r)
	if !ok {
		return
	}
	switch {
	case msg.IsNotification():
		if f.notified != nil {
			f.notified(w, r, msg)
		}
		w.WriteHeader(http.StatusAccepted)
	case msg.IsResponse():
		if f.answered != nil {
			f.answered(msg)
		}
		w.WriteHeader(http.StatusAccepted)
	case msg.Method == "tools/call":
		f.call(w, r, msg)
	case msg.Method == "initialize":
		writeJSON(w, msg.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
	case msg.Method == "tools/list":
		writeJSON(w, msg.ID, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
	default:
		writeJSON(w, msg.ID, `{}`)
	}
}

func writeJSON(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(jsonrpc.AppendLine(nil, &jsonrpc.Message{ID: id, Result: json.RawMessage(result)}))
}

func startRemote(t *testing.T, transport config.Transport, url string, opts Options) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if opts.Logger == nil {
		opts.Logger = newLogRecorder().Logger()
	}
	inst, err := Start(ctx, &config.Server{ID: "remote", Transport: transport, URL: url}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

func TestRemoteOversizedResponseFailsItsCall(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	text := strings.Repeat("x", 2*limit)
	for _, kind := range []string{"json", "sse"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(&fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
				line := jsonrpc.AppendLine(nil, &jsonrpc.Message{ID: req.ID, Result: json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`)})
				if kind == "json" {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(line)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n", line)
			}})
			t.Cleanup(srv.Close)
			inst := startRemote(t, config.TransportHTTP, srv.URL, Options{MaxMessage: limit})
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			_, err := inst.CallTool(ctx, Call{Name: "t"})
			require.Error(t, err)
			assert.NoError(t, ctx.Err(), "the call failed before its deadline")
			var tooLong *jsonrpc.TooLongError
			require.ErrorAs(t, err, &tooLong)
			assert.Equal(t, fmt.Sprintf(`server "remote": its response exceeds the limit of %d bytes`, limit), err.Error())
			require.NoError(t, inst.Ping(ctx), "the instance still serves")
		})
	}
}

func TestRemoteCancellationDoesNotHoldTheCaller(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	srv := httptest.NewServer(&fakeRemote{
		call: func(_ http.ResponseWriter, r *http.Request, _ *jsonrpc.Message) {
			select { // never answers
			case <-r.Context().Done():
			case <-release:
			}
		},
		notified: func(_ http.ResponseWriter, _ *http.Request, n *jsonrpc.Message) {
			if n.Method == "notifications/cancelled" {
				cancelled <- struct{}{}
				<-release // and does not take the notice either
			}
		},
	})
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	inst := startRemote(t, config.TransportHTTP, srv.URL, Options{})

	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	select {
	case res := <-callAsync(ctx, inst, Call{Name: "t"}):
		require.ErrorIs(t, res.err, context.DeadlineExceeded)
	case <-time.After(timeout + 5*time.Second):
		t.Fatal("the call outlived its deadline: the cancellation notice holds it")
	}
	assert.Less(t, time.Since(began), timeout+time.Second)
	select {
	case <-cancelled:
	case <-time.After(waitTimeout):
		t.Fatal("the upstream was never told the call was cancelled")
	}
}

// fakeSSE is a legacy HTTP+SSE MCP server with one stream. Closing drop
// ends the stream, as a server that goes away does.
type fakeSSE struct {
	out  chan []byte
	drop chan struct{}
	// answer, when set, is the message that answers a tools/call; without
	// it, tools/call is never answered.
	answer func(req *jsonrpc.Message) []byte
}

// serveLegacyStream is the GET stream of a legacy SSE server: the endpoint
// event naming /message, then each message of out, until drop is closed
// (nil: never) or the client leaves.
func serveLegacyStream[M string | []byte](w http.ResponseWriter, r *http.Request, out <-chan M, drop <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: endpoint\ndata: /message\n\n")
	w.(http.Flusher).Flush()
	for {
		select {
		case msg := <-out:
			_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
			w.(http.Flusher).Flush()
		case <-drop:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// decodePost reads the JSON-RPC message a POST carries; a body that is not
// one is answered 400 and ok is false.
func decodePost(w http.ResponseWriter, r *http.Request) (msg *jsonrpc.Message, ok bool) {
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return msg, true
}

func (f *fakeSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		serveLegacyStream(w, r, f.out, f.drop)
		return
	}
	msg, ok := decodePost(w, r)
	if !ok {
		return
	}
	w.WriteHeader(http.StatusAccepted)
	var result string
	switch msg.Method {
	case "initialize":
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`
	case "tools/list":
		result = `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`
	case "ping":
		result = `{}`
	case "tools/call":
		if f.answer != nil {
			f.out <- f.answer(msg)
		}
		return
	default:
		return // notifications need no answer
	}
	f.out <- (&jsonrpc.Message{ID: msg.ID, Result: json.RawMessage(result)}).Encode()
}

func TestRemoteSSEStreamLossFailsPendingCalls(t *testing.T) {
	t.Parallel()
	f := &fakeSSE{out: make(chan []byte, 16), drop: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	inst := startRemote(t, config.TransportSSE, srv.URL+"/sse", Options{})

	pending := callAsync(context.Background(), inst, Call{Name: "t"})
	close(f.drop)
	select {
	case res := <-pending:
		require.ErrorIs(t, res.err, ErrClosed)
		assert.Contains(t, res.err.Error(), "SSE stream ended")
	case <-time.After(waitTimeout):
		t.Fatal("a pending call outlived the stream its answer would come on")
	}
	select {
	case <-inst.Done():
	case <-time.After(waitTimeout):
		t.Fatal("Done did not close when the stream ended")
	}
	assert.Contains(t, inst.Err().Error(), `server "remote"`)
	_, err := inst.CallTool(context.Background(), Call{Name: "t"})
	assert.True(t, errors.Is(err, ErrClosed), "later calls fail at once: %v", err)
}
