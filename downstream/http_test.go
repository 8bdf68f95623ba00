package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// httpFake is a Handler that records what reaches it. Its answers come from
// handle when set; otherwise initialize succeeds and every other request
// gets {"method": ...}.
type httpFake struct {
	handle   func(ctx context.Context, req *Request) *jsonrpc.Message
	mu       sync.Mutex
	requests []*Request
	opened   chan Session
	closed   chan Session
	notified chan *jsonrpc.Message
}

func newHTTPFake() *httpFake {
	return &httpFake{opened: make(chan Session, 64), closed: make(chan Session, 64), notified: make(chan *jsonrpc.Message, 64)}
}

// seeingFake is a handler that passes every request it is given on seen
// (which holds four) and answers initialize with protocol 2025-11-25, any
// other with an empty result.
func seeingFake() (h *httpFake, seen chan *Request) {
	h = newHTTPFake()
	seen = make(chan *Request, 4)
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		seen <- req
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
	}
	return h, seen
}

func (f *httpFake) Handle(ctx context.Context, req *Request) *jsonrpc.Message {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.handle != nil {
		return f.handle(ctx, req)
	}
	if req.Msg.Method == "initialize" {
		return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)}
	}
	res, _ := jsonrpc.Result(nil, map[string]string{"method": req.Msg.Method})
	return res
}

func (f *httpFake) Notified(_ context.Context, _ Session, m *jsonrpc.Message) { f.notified <- m }
func (f *httpFake) SessionOpened(s Session)                                   { f.opened <- s }
func (f *httpFake) SessionClosed(s Session)                                   { f.closed <- s }

// seen returns the methods of the requests that reached the Handler.
func (f *httpFake) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var methods []string
	for _, r := range f.requests {
		methods = append(methods, r.Msg.Method)
	}
	return methods
}

func (f *httpFake) last() *Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

// httpServer is the transport served by Serve on a loopback port.
type httpServer struct {
	tr     *HTTP
	h      *httpFake
	addr   string // 127.0.0.1:port
	url    string // http://127.0.0.1:port/mcp
	client *http.Client
	served chan error // Serve's result
	once   sync.Once
	err    error
}

// serveResult waits for Serve to return.
func (s *httpServer) serveResult(t *testing.T) error {
	s.once.Do(func() { s.err = recv(t, s.served) })
	return s.err
}

func serveHTTP(t *testing.T, h *httpFake, opts HTTPOptions) *httpServer {
	t.Helper()
	return serveAs(t, h, opts, nil)
}

// serveAs serves the transport at /mcp until the test ends; with caller, behind
// a stand-in for the gateway's authentication that puts on each request's
// context the identity.Caller caller says sent it.
func serveAs(t *testing.T, h *httpFake, opts HTTPOptions, caller func(r *http.Request) identity.Caller) *httpServer {
	t.Helper()
	if caller == nil {
		return serveBehind(t, h, opts, nil)
	}
	return serveBehind(t, h, opts, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(identity.WithCaller(r.Context(), caller(r))))
		})
	})
}

// serveBehind serves the transport at /mcp until the test ends, behind
// front when set: a handler in front of the endpoint, as the gateway's are.
func serveBehind(t *testing.T, h *httpFake, opts HTTPOptions, front func(http.Handler) http.Handler) *httpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tr := NewHTTP(h, opts)
	mux := http.NewServeMux()
	if front == nil {
		mux.Handle("/mcp", tr)
	} else {
		mux.Handle("/mcp", front(tr))
	}
	s := &httpServer{
		tr: tr, h: h, addr: ln.Addr().String(), url: "http://" + ln.Addr().String() + "/mcp",
		client: &http.Client{Transport: &http.Transport{}}, served: make(chan error, 1),
	}
	go func() { s.served <- tr.Serve(ln, mux) }()
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, tr.Shutdown(ctx))
		assert.NoError(t, s.serveResult(t))
	})
	return s
}

// request sends an HTTP request to the MCP endpoint with the usual headers;
// hdr adds to them, and an empty value removes one.
func (s *httpServer) request(t *testing.T, method, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.url, strings.NewReader(body))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range hdr {
		switch {
		case strings.EqualFold(k, "Host"):
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	return resp
}

func (s *httpServer) post(t *testing.T, body string, hdr map[string]string) *http.Response {
	t.Helper()
	return s.request(t, http.MethodPost, body, hdr)
}

// sessionPost posts body in session id.
func (s *httpServer) sessionPost(t *testing.T, id, body string) *http.Response {
	t.Helper()
	return s.post(t, body, map[string]string{headerSessionID: id})
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// initialize opens a session and returns its id.
func (s *httpServer) initialize(t *testing.T) string {
	t.Helper()
	resp := s.post(t, initializeBody, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readMessage(t, resp)
	id := resp.Header.Get(headerSessionID)
	require.NotEmpty(t, id)
	return id
}

// readMessage reads a whole JSON response.
func readMessage(t *testing.T, resp *http.Response) *jsonrpc.Message {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	msg, err := jsonrpc.Decode(body)
	require.NoError(t, err, "body %q", body)
	return msg
}

// requireRefused checks a refusal: its status, and a JSON-RPC error body
// with code and a message containing hint.
func requireRefused(t *testing.T, resp *http.Response, status, code int, hint string) *jsonrpc.Message {
	t.Helper()
	require.Equal(t, status, resp.StatusCode)
	msg := readMessage(t, resp)
	require.NotNil(t, msg.Error)
	assert.Equal(t, code, msg.Error.Code)
	assert.Contains(t, msg.Error.Message, hint)
	return msg
}

// sse reads SSE events from a response body.
type sse struct {
	r        *bufio.Reader
	comments int
}

func newSSE(body io.Reader) *sse { return &sse{r: bufio.NewReader(body)} }

// next returns the next event's message, skipping comment lines.
func (s *sse) next() (*jsonrpc.Message, error) {
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && len(data) > 0:
			return jsonrpc.Decode([]byte(strings.Join(data, "\n")))
		case strings.HasPrefix(line, ":"):
			s.comments++
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

// recv waits for a value from ch, for a few seconds at most.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting")
		panic("unreachable")
	}
}

// eventually polls cond until it holds, for a few seconds at most.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHTTPInitializeOpensSession(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})

	resp := s.post(t, initializeBody, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	msg := readMessage(t, resp)
	assert.JSONEq(t, `1`, string(msg.ID))
	id := resp.Header.Get(headerSessionID)
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), id)

	opened := recv(t, h.opened)
	assert.Equal(t, id, opened.Key())
	assert.Equal(t, 1, s.tr.Sessions())
	assert.Equal(t, "2025-06-18", h.last().Protocol)

	// The session serves later requests with the negotiated version.
	resp = s.sessionPost(t, id, `{"jsonrpc":"2.0","id":"two","method":"tools/list"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	msg = readMessage(t, resp)
	assert.JSONEq(t, `"two"`, string(msg.ID))
	assert.JSONEq(t, `{"method":"tools/list"}`, string(msg.Result))
	last := h.last()
	assert.Equal(t, id, last.Session.Key())
	assert.Equal(t, "2025-06-18", last.Protocol)

	resp = s.sessionPost(t, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, "notifications/initialized", recv(t, h.notified).Method)

	// A response no request awaits is accepted and dropped: client
	// responses never reach the Handler.
	resp = s.sessionPost(t, id, `{"jsonrpc":"2.0","id":"srv-1","result":{}}`)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Empty(t, h.notified)
}

func TestHTTPFailedInitializeOpensNoSession(t *testing.T) {
	h := newHTTPFake()
	h.handle = func(context.Context, *Request) *jsonrpc.Message {
		return jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no"))
	}
	s := serveHTTP(t, h, HTTPOptions{})

	resp := s.post(t, initializeBody, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(headerSessionID))
	assert.Equal(t, jsonrpc.CodeInvalidParams, readMessage(t, resp).Error.Code)
	assert.Zero(t, s.tr.Sessions())
	assert.Empty(t, h.opened)
}

func TestHTTPUnknownSessionNeverReachesHandler(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	live := s.initialize(t)
	forged := strings.Repeat("ab", 16)
	before := len(h.seen())

	resp := s.sessionPost(t, forged, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}`)
	msg := requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "send initialize")
	assert.JSONEq(t, `3`, string(msg.ID))
	resp = s.sessionPost(t, forged, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	resp = s.request(t, http.MethodGet, "", map[string]string{headerSessionID: forged, "Accept": "text/event-stream"})
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	resp = s.request(t, http.MethodDelete, "", map[string]string{headerSessionID: forged})
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	resp = s.post(t, initializeBody, map[string]string{headerSessionID: forged})
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")

	// No id at all, and initialize over a live session.
	resp = s.post(t, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, nil)
	requireRefused(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Mcp-Session-Id header is required; send initialize first")
	resp = s.post(t, initializeBody, map[string]string{headerSessionID: live})
	requireRefused(t, resp, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "already initialized")

	// An unsupported version header on a session request.
	resp = s.post(t, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, map[string]string{headerSessionID: live, headerProtocol: "1999-01-01"})
	requireRefused(t, resp, http.StatusBadRequest, codeUnsupportedVersion, "1999-01-01")

	assert.Len(t, h.seen(), before, "nothing reached the Handler")
	assert.Empty(t, h.notified)
	assert.Equal(t, 1, s.tr.Sessions())
}

func TestHTTPDeleteEndsSession(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)

	resp := s.request(t, http.MethodDelete, "", map[string]string{headerSessionID: id})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	assert.Equal(t, id, recv(t, h.closed).Key())
	assert.Zero(t, s.tr.Sessions())

	resp = s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	resp = s.request(t, http.MethodDelete, "", map[string]string{headerSessionID: id})
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
	assert.Equal(t, []string{"initialize"}, h.seen())
}

func TestHTTPIdleSessionExpires(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{SessionIdleTTL: 50 * time.Millisecond})
	id := s.initialize(t)

	assert.Equal(t, id, recv(t, h.closed).Key())
	assert.Zero(t, s.tr.Sessions())
	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	requireRefused(t, resp, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found")
}

func TestHTTPBusySessionDoesNotExpire(t *testing.T) {
	const ttl = 40 * time.Millisecond
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHTTPFake()
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "tools/call" {
			started <- struct{}{}
			<-release
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
	}
	s := serveHTTP(t, h, HTTPOptions{SessionIdleTTL: ttl})

	// A request in flight keeps the session.
	id := s.initialize(t)
	done := make(chan int, 1)
	go func() {
		resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	recv(t, started)
	select {
	case <-h.closed:
		t.Fatal("a session with a request in flight expired")
	case <-time.After(8 * ttl):
	}
	close(release)
	assert.Equal(t, http.StatusOK, recv(t, done))
	assert.Equal(t, id, recv(t, h.closed).Key(), "idle once the request ended")

	// So does an open GET stream.
	id = s.initialize(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	req.Header.Set(headerSessionID, id)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	select {
	case <-h.closed:
		t.Fatal("a session with an open GET stream expired")
	case <-time.After(8 * ttl):
	}
	cancel()
	resp.Body.Close()
	assert.Equal(t, id, recv(t, h.closed).Key(), "idle once the stream closed")
}

func TestHTTPRequestErrors(t *testing.T) {
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{})
	for _, tc := range []struct {
		name   string
		method string
		body   string
		hdr    map[string]string
		status int
		code   int
		hint   string
	}{
		{"content type", http.MethodPost, initializeBody, map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, "application/json"},
		{"accept", http.MethodPost, initializeBody, map[string]string{"Accept": "text/html"}, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "text/event-stream"},
		{"batch", http.MethodPost, "[" + initializeBody + "]", nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "send initialize alone first"},
		{"not json", http.MethodPost, `{"jsonrpc":`, nil, http.StatusBadRequest, jsonrpc.CodeParseError, "not valid JSON"},
		{"not json-rpc", http.MethodPost, `{"jsonrpc":"1.0","id":9,"method":"x"}`, nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, `"jsonrpc" must be "2.0"`},
		{"method", http.MethodPut, "", nil, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "use POST"},
		{"get accept", http.MethodGet, "", map[string]string{"Accept": "application/json"}, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "text/event-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireRefused(t, s.request(t, tc.method, tc.body, tc.hdr), tc.status, tc.code, tc.hint)
		})
	}
	// A missing Accept is fine.
	resp := s.post(t, initializeBody, map[string]string{"Accept": ""})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
}

func TestHTTPHandlerPanicIsAnInternalError(t *testing.T) {
	h := newHTTPFake()
	h.handle = func(context.Context, *Request) *jsonrpc.Message { panic("boom") }
	s := serveHTTP(t, h, HTTPOptions{})
	resp := s.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{headerProtocol: "2026-07-28", headerMethod: "tools/list"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	msg := readMessage(t, resp)
	assert.JSONEq(t, `1`, string(msg.ID))
	assert.Equal(t, jsonrpc.CodeInternalError, msg.Error.Code)
}

func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		header    string
		json, sse bool
	}{
		{"", true, true},
		{"application/json, text/event-stream", true, true},
		{"application/json", true, false},
		{"text/event-stream", false, true},
		{"*/*", true, true},
		{"application/*;q=0.5, text/*", true, true},
		{"application/json, text/event-stream;q=0", true, false},
		{"text/html", false, false},
		{"Application/JSON", true, false},
		{"TEXT/EVENT-STREAM ,  application/json;q=0", false, true},
		{"application/json;q=1, text/event-stream;q=0.0", true, false},
		{"application/json;charset=utf-8", true, false},
		{"application/json;q=x", true, false}, // an unreadable q does not refuse
		{"text/event-stream;", false, true},   // an empty parameter list is tolerated
	} {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		if tc.header != "" {
			r.Header.Set("Accept", tc.header)
		}
		json, sse := accepts(r)
		assert.Equal(t, [2]bool{tc.json, tc.sse}, [2]bool{json, sse}, tc.header)
	}
}

func TestJSONContent(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                true,
		"Application/Json":                true,
		"application/json; charset=utf-8": true,
		"application/jsonx":               false,
		"text/plain":                      false,
		"":                                false,
	} {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Content-Type", ct)
		assert.Equal(t, want, jsonContent(r), ct)
	}
}

// FuzzMediaRange: the usual media ranges, recognised without parsing, get
// the answer parsing gives them, however they are spelled.
func FuzzMediaRange(f *testing.F) {
	for _, seed := range []string{"application/json", "TEXT/event-stream", "*/*", "application/json;q=0",
		"text/event-stream; charset=utf-8", "application/jsonx", "", "*/*;q=0.0", "Application/JSON "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, part string) {
		got, ok := mediaRange(part)
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			assert.False(t, ok, "%q does not parse, yet was taken as %q", part, got)
			return
		}
		refused := false
		if qs, has := params["q"]; has {
			q, err := strconv.ParseFloat(qs, 64)
			refused = err == nil && q <= 0
		}
		assert.Equal(t, !refused, ok, "%q", part)
		if ok {
			assert.Equal(t, mt, got, "%q", part)
		}
	})
}

// Ending a session (DELETE) ends its requests in flight, with the session's
// cause; another session's request runs on.
func TestHTTPDeleteEndsRequestsInFlight(t *testing.T) {
	h := newHTTPFake()
	started := make(chan string, 2)
	causes := make(chan error, 2)
	release := make(chan struct{})
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		started <- req.Session.Key()
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return nil
		case <-release:
			return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
		}
	}
	s := serveHTTP(t, h, HTTPOptions{})
	a, b := s.initialize(t), s.initialize(t)
	statuses := make(chan int, 2)
	for _, id := range []string{a, b} {
		go func() {
			resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	recv(t, started)
	recv(t, started)

	resp := s.request(t, http.MethodDelete, "", map[string]string{headerSessionID: a})
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.ErrorIs(t, recv(t, causes), errSessionEnded)
	select {
	case err := <-causes:
		t.Fatalf("the other session's request ended too: %v", err)
	default:
	}
	close(release)
	got := []int{recv(t, statuses), recv(t, statuses)}
	assert.ElementsMatch(t, []int{http.StatusOK, http.StatusNotFound}, got)
}

// A client that leaves, closing its connection, ends its request in
// flight as a cancellation; a request on another connection runs on, and
// so does the next request on a connection whose request ended.
func TestHTTPClientLeavingEndsItsRequest(t *testing.T) {
	h := newHTTPFake()
	started := make(chan struct{}, 4)
	causes := make(chan error, 4)
	release := make(chan struct{})
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-11-25"}`)}
		}
		if ctx.Err() != nil {
			causes <- context.Cause(ctx)
			return nil
		}
		started <- struct{}{}
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return nil
		case <-release:
			return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
		}
	}
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)

	// The leaving client, on a connection of its own.
	sent, leave := s.leavingPost(t, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`)
	recv(t, started)

	staying := make(chan int, 1)
	go func() {
		resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}`)
		resp.Body.Close()
		staying <- resp.StatusCode
	}()
	recv(t, started)

	leave() // the transport closes the connection
	assert.Error(t, recv(t, sent))
	assert.ErrorIs(t, recv(t, causes), context.Canceled)
	select {
	case err := <-causes:
		t.Fatalf("the other request ended too: %v", err)
	default:
	}
	close(release)
	assert.Equal(t, http.StatusOK, recv(t, staying))

	// The staying client's connection serves its next request whole.
	resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow"}}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Nil(t, readMessage(t, resp).Error)
	select {
	case err := <-causes:
		t.Fatalf("a request after one that ended was cancelled: %v", err)
	default:
	}
}

// A client that leaves a batch (of protocol 2025-03-26, the last with
// batches) ends every request of it in flight.
func TestHTTPClientLeavingEndsItsBatch(t *testing.T) {
	h := newHTTPFake()
	started := make(chan struct{}, 4)
	causes := make(chan error, 4)
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-03-26"}`)}
		}
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil
	}
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)

	sent, leave := s.leavingPost(t, id,
		`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}]`)
	recv(t, started)
	recv(t, started)

	leave()
	assert.Error(t, recv(t, sent))
	for range 2 {
		assert.ErrorIs(t, recv(t, causes), context.Canceled)
	}
}

// leavingPost posts body to session id on a connection of its own, which
// leave closes (the client going away); sent tells how the post ended.
func (s *httpServer) leavingPost(t *testing.T, id, body string) (sent <-chan error, leave func()) {
	t.Helper()
	ctx, leave := context.WithCancel(context.Background())
	t.Cleanup(leave)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(headerSessionID, id)
	done := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	return done, leave
}
