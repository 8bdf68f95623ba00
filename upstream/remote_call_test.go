package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// sessionRemote is fakeRemote with a session: initialize's answer names
// one, and get serves GETs (nil: 405).
type sessionRemote struct {
	fakeRemote
	get func(w http.ResponseWriter, r *http.Request)
}

func (f *sessionRemote) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && f.get != nil {
		f.get(w, r)
		return
	}
	w.Header().Set("Mcp-Session-Id", "session-1")
	f.fakeRemote.ServeHTTP(w, r)
}

func startSessionRemote(t *testing.T, f *sessionRemote, headers map[string]string, opts Options) *Instance {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	ctx := testContext(t)
	if opts.Logger == nil {
		opts.Logger = newLogRecorder().Logger()
	}
	inst, err := Start(ctx, &config.Server{ID: "remote", Transport: config.TransportHTTP, URL: srv.URL, Headers: headers}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

// startStatusRemote starts an instance of a sessionRemote that answers
// tools/call with status and body.
func startStatusRemote(t *testing.T, status int, body string) *Instance {
	t.Helper()
	f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, _ *jsonrpc.Message) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}}}
	return startSessionRemote(t, f, nil, Options{})
}

func TestRemoteCallSendsTheSessionAndKeepsTheResult(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, r *http.Request, req *jsonrpc.Message) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = fmt.Fprintf(w, "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": %s,\n  \"result\": {\n    \"content\": [],\n    \"n\": %s\n  }\n}\n", req.ID, big)
	}}}
	inst := startSessionRemote(t, f, map[string]string{"X-Team": "blue"}, Options{})
	raw, err := inst.CallTool(testContext(t), Call{Name: "t"})
	require.NoError(t, err)
	assert.Equal(t, `{"content":[],"n":`+big+`}`, string(raw), "one line, every token as it came")
	h := <-got
	assert.Equal(t, "session-1", h.Get("Mcp-Session-Id"))
	assert.Equal(t, "2025-11-25", h.Get("Mcp-Protocol-Version"))
	assert.Equal(t, "blue", h.Get("X-Team"))
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	assert.Equal(t, "application/json, text/event-stream", h.Get("Accept"))
}

func TestRemoteCallStreamResumedAfterTheUpstreamEndsIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var pending json.RawMessage
	resumedFrom := make(chan string, 1)
	f := &sessionRemote{
		fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
			mu.Lock()
			pending = req.ID
			mu.Unlock()
			// A priming event with an id, then the stream ends.
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: ev-1\nretry: 10\ndata: \n\n")
		}},
		get: func(w http.ResponseWriter, r *http.Request) {
			last := r.Header.Get("Last-Event-ID")
			if last == "" {
				w.WriteHeader(http.StatusMethodNotAllowed) // no standalone stream
				return
			}
			resumedFrom <- last
			mu.Lock()
			id := pending
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprintf(w, "id: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":%s}}\n\n", big)
			_, _ = fmt.Fprintf(w, "id: ev-3\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\n", id)
			_, _ = io.WriteString(w, "data: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"late\"}]}}\n\n")
		},
	}
	log := newNotificationLog()
	inst := startSessionRemote(t, f, nil, Options{OnNotification: log.add})
	raw, err := inst.CallTool(testContext(t), Call{Name: "t"})
	require.NoError(t, err)
	assert.Equal(t, `{"content":[{"type":"text","text":"late"}]}`, string(raw))
	assert.Equal(t, "ev-1", <-resumedFrom)
	assert.Equal(t, Notification{Method: "notifications/message", Params: json.RawMessage(`{"level":"info","data":` + big + `}`)}, log.waitLen(t, 1)[0])
}

func TestRemoteCallErrorStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want string
		status           int
		rpc              *RPCError
	}{
		{name: "json-rpc error", status: http.StatusBadRequest, body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad","data":{"n":` + big + `}}}`,
			rpc: &RPCError{Code: -32602, Message: "bad", Data: json.RawMessage(`{"n":` + big + `}`)}},
		{name: "page", status: http.StatusBadGateway, body: "<html>\n<b>upstream   down</b>\n</html>",
			want: `server "remote": it answered tools/call with HTTP status 502: "<html> <b>upstream down</b> </html>"`},
		{name: "empty", status: http.StatusServiceUnavailable,
			want: `server "remote": it answered tools/call with HTTP status 503`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inst := startStatusRemote(t, tc.status, tc.body)
			_, err := inst.CallTool(testContext(t), Call{Name: "t"})
			require.Error(t, err)
			if tc.rpc != nil {
				var rpcErr *RPCError
				require.ErrorAs(t, err, &rpcErr)
				assert.Equal(t, tc.rpc, rpcErr)
			} else {
				assert.EqualError(t, err, tc.want)
			}
			require.NoError(t, inst.Ping(testContext(t)), "the connection still serves")
		})
	}
}

func TestRemoteSessionLostFailsTheConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{name: "404", status: http.StatusNotFound},
		// As servers built on the TypeScript SDK's examples answer.
		{name: "400 about the session", status: http.StatusBadRequest,
			body: `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inst := startStatusRemote(t, tc.status, tc.body)
			_, err := inst.CallTool(testContext(t), Call{Name: "t"})
			require.EqualError(t, err, fmt.Sprintf(`server "remote": it no longer knows the session (HTTP %d to tools/call); connecting again`, tc.status))
			select {
			case <-inst.Done():
			case <-time.After(waitTimeout):
				t.Fatal("the connection outlived its session")
			}
			assert.ErrorContains(t, inst.Err(), "no longer knows the session")
		})
	}
}

func TestRemoteCallErrorKeepsItsData(t *testing.T) {
	t.Parallel()
	f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"no","data":{"n":%s,"f":1.50}}}`, req.ID, big)
	}}}
	inst := startSessionRemote(t, f, nil, Options{})
	_, err := inst.CallTool(testContext(t), Call{Name: "t"})
	var rpcErr *RPCError
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, &RPCError{Code: -32001, Message: "no", Data: json.RawMessage(`{"n":` + big + `,"f":1.50}`)}, rpcErr,
		"the error's data as the upstream sent it")
}

func TestRemoteGETStreamNoticesTheSessionEnd(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	gets := 0
	f := &sessionRemote{get: func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		gets++
		n := gets
		mu.Unlock()
		if n == 1 {
			// The stream opens on the session, then ends; it is asked for again.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}}
	inst := startSessionRemote(t, f, nil, Options{})
	select {
	case <-inst.Done():
	case <-time.After(waitTimeout):
		t.Fatal("the connection outlived its session")
	}
	assert.EqualError(t, inst.Err(), `server "remote": it no longer knows the session (HTTP 404 to the GET stream); connecting again`)
}

func TestRemoteGETStreamRefusedFromTheStart(t *testing.T) {
	t.Parallel()
	answered := make(chan struct{}, 1)
	f := &sessionRemote{get: func(w http.ResponseWriter, _ *http.Request) {
		// No stream on this server, said the wrong way (405 is right).
		w.WriteHeader(http.StatusNotFound)
		select {
		case answered <- struct{}{}:
		default:
		}
	}}
	inst := startSessionRemote(t, f, nil, Options{})
	select {
	case <-answered:
	case <-time.After(waitTimeout):
		t.Fatal("no GET stream was asked for")
	}
	require.NoError(t, inst.Ping(testContext(t)))
	select {
	case <-inst.Done():
		t.Fatalf("a server without a stream lost its connection: %v", inst.Err())
	default:
	}
}

func TestRemoteSSECallsKeepTheirAnswers(t *testing.T) {
	t.Parallel()
	f := &fakeSSE{out: make(chan []byte, 16), drop: make(chan struct{}), answer: func(req *jsonrpc.Message) []byte {
		if bytes.Contains(req.Params, []byte(`"fail"`)) {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"no","data":{"n":%s,"f":1.50}}}`, req.ID, big)
		}
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[],"n":%s}}`, req.ID, big)
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	inst := startRemote(t, config.TransportSSE, srv.URL+"/sse", Options{})
	ctx := testContext(t)

	raw, err := inst.CallTool(ctx, Call{Name: "ok"})
	require.NoError(t, err)
	assert.Equal(t, `{"content":[],"n":`+big+`}`, string(raw))
	_, err = inst.CallTool(ctx, Call{Name: "fail"})
	var rpcErr *RPCError
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, &RPCError{Code: -32001, Message: "no", Data: json.RawMessage(`{"n":` + big + `,"f":1.50}`)}, rpcErr,
		"the error's data as the upstream sent it")
	require.NoError(t, inst.Ping(ctx))
}

// TestRemoteCallOverHTTP2: the raw exchange over HTTP/2 and TLS, as most
// remote servers speak: a JSON answer, and an event stream closed by the
// aggregator once its response is in while the upstream keeps it open.
func TestRemoteCallOverHTTP2(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	protos := make(chan int, 8)
	f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, r *http.Request, req *jsonrpc.Message) {
		protos <- r.ProtoMajor
		if bytes.Contains(req.Params, []byte(`"json"`)) {
			writeJSON(w, req.ID, `{"content":[],"via":"json"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[],\"via\":\"sse\"}}\n\n", req.ID)
		w.(http.Flusher).Flush()
		select { // the stream stays open until the aggregator leaves
		case <-r.Context().Done():
		case <-release:
		}
	}}}
	srv := httptest.NewUnstartedServer(f)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ctx := testContext(t)
	inst, err := Start(ctx, &config.Server{ID: "remote", Transport: config.TransportHTTP, URL: srv.URL, Auth: config.ServerAuth{Type: config.ServerAuthOAuth}},
		Options{Logger: newLogRecorder().Logger(), Authorize: func(*config.Server, http.RoundTripper) (http.RoundTripper, error) {
			return srv.Client().Transport, nil // trusts the test certificate; HTTP/2
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	for range 3 {
		for _, via := range []string{"json", "sse"} {
			raw, err := inst.CallTool(ctx, Call{Name: via})
			require.NoError(t, err)
			assert.Equal(t, `{"content":[],"via":"`+via+`"}`, string(raw))
			assert.Equal(t, 2, <-protos)
		}
	}
}

func TestRemoteCallBadAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, contentType, body, want string }{
		{"content type", "text/plain", "hello",
			`server "remote": it answered tools/call with content type "text/plain"; expected application/json or text/event-stream`},
		{"not JSON-RPC", "application/json", `{"ok":true}`,
			`server "remote": its response to tools/call is not a JSON-RPC response: invalid request: "jsonrpc" must be "2.0"`},
		{"another id", "application/json", `{"jsonrpc":"2.0","id":999,"result":{}}`,
			`server "remote": it answered tools/call (id 3) with a message that is not its response`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, _ *jsonrpc.Message) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = io.WriteString(w, tc.body)
			}}}
			inst := startSessionRemote(t, f, nil, Options{})
			_, err := inst.CallTool(testContext(t), Call{Name: "t"})
			require.EqualError(t, err, tc.want)
			require.NoError(t, inst.Ping(testContext(t)), "the connection still serves")
		})
	}
}

// TestRemoteCallDeepAnswer: a response nested deeper than JSON parsers
// take fails its call at once, saying so, on a JSON body and on an event
// stream that the server keeps open after it; the connection still serves.
func TestRemoteCallDeepAnswer(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, tc := range []struct{ name, contentType, format, want string }{
		{"JSON body", "application/json", `{"jsonrpc":"2.0","id":%s,"result":{"content":[],"deep":%s}}`,
			`server "remote": its response to tools/call is not a JSON-RPC response: parse error: the message is nested more than 10000 levels deep`},
		{"event stream", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[],\"deep\":%s}}\n\n",
			`server "remote": its response to tools/call cannot be read (parse error: the message is nested more than 10000 levels deep); the server does not follow JSON-RPC 2.0, report it to its maintainers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, r *http.Request, req *jsonrpc.Message) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = fmt.Fprintf(w, tc.format, req.ID, deep)
				if tc.contentType == "text/event-stream" {
					w.(http.Flusher).Flush()
					<-r.Context().Done() // the stream stays open
				}
			}}}
			inst := startSessionRemote(t, f, nil, Options{})
			_, err := inst.CallTool(testContext(t), Call{Name: "t"})
			require.EqualError(t, err, tc.want)
			require.NoError(t, inst.Ping(testContext(t)), "the connection still serves")
		})
	}
}

// TestRemoteCallInvalidUTF8IsRepaired: a result that is not UTF-8, on a
// JSON body or an event stream, reaches the caller as valid UTF-8, each
// invalid byte as U+FFFD and the rest as it came.
func TestRemoteCallInvalidUTF8IsRepaired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, contentType, format string }{
		{"JSON body", "application/json", `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"caf` + "\xe9 \xff\xfe \u00e9" + `"}]}}`},
		{"event stream", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"caf\xe9 \xff\xfe \u00e9\"}]}}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &sessionRemote{fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = fmt.Fprintf(w, tc.format, req.ID)
			}}}
			inst := startSessionRemote(t, f, nil, Options{})
			raw, err := inst.CallTool(testContext(t), Call{Name: "t"})
			require.NoError(t, err)
			assert.Equal(t, `{"content":[{"type":"text","text":"caf`+"\uFFFD \uFFFD\uFFFD \u00e9"+`"}]}`, string(raw))
		})
	}
}

// TestRemoteLegacySSEServerAtAStreamableURL: a server that takes no POST at
// its URL (404 or 405), as a server of the legacy HTTP+SSE transport does,
// fails the start with an error that says how to reach it.
func TestRemoteLegacySSEServerAtAStreamableURL(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusMethodNotAllowed} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
			t.Cleanup(srv.Close)
			_, err := Start(testContext(t), &config.Server{ID: "remote", Transport: config.TransportHTTP, URL: srv.URL + "/sse"},
				Options{Logger: newLogRecorder().Logger()})
			require.Error(t, err)
			assert.Contains(t, err.Error(), fmt.Sprintf("it answered initialize with HTTP status %d", status))
			assert.Contains(t, err.Error(), "set transport: sse")
		})
	}
}
