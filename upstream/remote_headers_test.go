package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// headerLog keeps the method and headers of every request a test server
// is sent.
type headerLog struct {
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method string
	header http.Header
}

func (l *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, seenRequest{r.Method, r.Header.Clone()})
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// of returns the headers of the requests of method so far.
func (l *headerLog) of(method string) []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []http.Header
	for _, s := range l.seen {
		if s.method == method {
			out = append(out, s.header)
		}
	}
	return out
}

// waitFor waits for a request of method and returns the headers of all of
// them so far.
func (l *headerLog) waitFor(t *testing.T, method string) []http.Header {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		if got := l.of(method); len(got) > 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s request within %s", method, waitTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var credentialHeaders = map[string]string{"Authorization": "Bearer static-0123456789", "X-Secret": "secret-0123456789"}

// sessionServer is a streamable-HTTP server with a session whose GET
// stream is refused; every request is logged.
func sessionServer(log *headerLog) *httptest.Server {
	return httptest.NewServer(log.wrap(&sessionRemote{
		fakeRemote: fakeRemote{call: func(w http.ResponseWriter, _ *http.Request, req *jsonrpc.Message) {
			writeJSON(w, req.ID, `{"content":[]}`)
		}},
		get: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) },
	}))
}

// startWithHeaders starts an instance of the server at url with
// credentialHeaders, makes a call, waits for the GET stream's first
// attempt and closes the instance, which ends the session (DELETE).
func startWithHeaders(t *testing.T, transport config.Transport, url string, get *headerLog) {
	t.Helper()
	ctx := testContext(t)
	inst, err := Start(ctx, &config.Server{ID: "remote", Transport: transport, URL: url, Headers: credentialHeaders},
		Options{Logger: newLogRecorder().Logger()})
	require.NoError(t, err)
	_, err = inst.CallTool(ctx, Call{Name: "t"})
	require.NoError(t, err)
	get.waitFor(t, http.MethodGet)
	require.NoError(t, inst.Close())
}

func assertCredentials(t *testing.T, what string, headers []http.Header) {
	t.Helper()
	require.NotEmpty(t, headers, "no %s", what)
	for _, h := range headers {
		for k, v := range credentialHeaders {
			assert.Equal(t, v, h.Get(k), "%s lacks the configured %s", what, k)
		}
	}
}

func assertNoCredentials(t *testing.T, what string, headers []http.Header) {
	t.Helper()
	require.NotEmpty(t, headers, "no %s", what)
	for _, h := range headers {
		for k := range credentialHeaders {
			assert.Empty(t, h.Get(k), "%s carried the configured %s to another origin", what, k)
		}
	}
}

// TestRemoteConfiguredHeadersGoWithEveryRequest: the configured headers
// go with every request to a streamable-HTTP server, the GET stream and
// the DELETE that ends the session included, not only its POSTs.
func TestRemoteConfiguredHeadersGoWithEveryRequest(t *testing.T) {
	t.Parallel()
	log := &headerLog{}
	srv := sessionServer(log)
	t.Cleanup(srv.Close)
	startWithHeaders(t, config.TransportHTTP, srv.URL+"/mcp", log)

	assertCredentials(t, "POST", log.of(http.MethodPost))
	assertCredentials(t, "GET stream", log.of(http.MethodGet))
	deletes := log.of(http.MethodDelete)
	assertCredentials(t, "DELETE", deletes)
	assert.Equal(t, "session-1", deletes[0].Get("Mcp-Session-Id"))
}

// TestRemoteConfiguredHeadersStayWithTheOriginOnEveryRequest: a server
// whose URL redirects its GET stream and its DELETE (307) to another origin
// gets its configured headers on every request, the redirect target on
// none. (A POST, whose body is the user's, is not sent to another origin at
// all: TestRemoteRedirectElsewhereKeepsTheBody.)
func TestRemoteConfiguredHeadersStayWithTheOriginOnEveryRequest(t *testing.T) {
	t.Parallel()
	elsewhere := &headerLog{}
	other := sessionServer(elsewhere)
	t.Cleanup(other.Close)
	own := &headerLog{}
	serve := sessionServer(&headerLog{})
	t.Cleanup(serve.Close)
	origin := httptest.NewServer(own.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			serve.Config.Handler.ServeHTTP(w, r)
			return
		}
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})))
	t.Cleanup(origin.Close)
	startWithHeaders(t, config.TransportHTTP, origin.URL+"/mcp", elsewhere)

	assertCredentials(t, "POST to the server's origin", own.of(http.MethodPost))
	assert.Empty(t, elsewhere.of(http.MethodPost))
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		assertCredentials(t, method+" to the server's origin", own.of(method))
		assertNoCredentials(t, method+" redirected to another origin", elsewhere.of(method))
	}
}

// TestRemoteSSEConfiguredHeaders: a legacy SSE server gets the configured
// headers on its stream and on every POST to its endpoint.
func TestRemoteSSEConfiguredHeaders(t *testing.T) {
	t.Parallel()
	log := &headerLog{}
	f := &fakeSSE{out: make(chan []byte, 16), drop: make(chan struct{}), answer: func(req *jsonrpc.Message) []byte {
		return (&jsonrpc.Message{ID: req.ID, Result: []byte(`{"content":[]}`)}).Encode()
	}}
	srv := httptest.NewServer(log.wrap(f))
	t.Cleanup(srv.Close)
	startWithHeaders(t, config.TransportSSE, srv.URL+"/sse", log)
	assertCredentials(t, "SSE stream", log.of(http.MethodGet))
	assertCredentials(t, "POST to the endpoint", log.of(http.MethodPost))
}

// otherOrigin is a server on another origin that counts what reaches it.
func otherOrigin(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(other.Close)
	return other, &hits
}

// TestRemoteSSEEndpointOnAnotherOriginFailsTheStart: a legacy SSE server
// whose stream names an endpoint on another origin is refused at once,
// with an error that names both origins and nothing else of the URLs, and
// the other origin is sent nothing.
func TestRemoteSSEEndpointOnAnotherOriginFailsTheStart(t *testing.T) {
	t.Parallel()
	other, hits := otherOrigin(t)
	sse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "event: endpoint\ndata: %s/message?session=endpoint-secret\n\n", other.URL)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(sse.Close)

	const connectTimeout = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	rec := newLogRecorder()
	began := time.Now()
	_, err := Start(ctx, &config.Server{ID: "remote", Transport: config.TransportSSE, URL: sse.URL + "/sse?key=url-secret",
		Headers: credentialHeaders}, Options{Logger: rec.Logger()})
	require.Error(t, err)
	assert.Less(t, time.Since(began), connectTimeout/4, "the start waited for connect_timeout")
	msg := err.Error()
	t.Log(msg)
	assert.Contains(t, msg, `server "remote"`)
	assert.Contains(t, msg, "origin ("+other.URL+")")
	assert.Contains(t, msg, "url ("+sse.URL+")")
	assert.Contains(t, msg, "streamable HTTP endpoint")
	assert.NotContains(t, msg, "deadline")
	for _, secret := range []string{"/sse", "/message", "url-secret", "endpoint-secret"} {
		assert.NotContains(t, msg, secret)
	}
	assert.Zero(t, hits.Load(), "the other origin was sent a request")
}

// TestRemoteSSEEndpointMovedToAnotherOriginEndsTheConnection: an endpoint
// event naming another origin after the connection is up ends it, naming
// the origins, and the other origin is sent nothing.
func TestRemoteSSEEndpointMovedToAnotherOriginEndsTheConnection(t *testing.T) {
	t.Parallel()
	other, hits := otherOrigin(t)
	move := make(chan struct{})
	f := &fakeSSE{out: make(chan []byte, 16), drop: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			f.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: endpoint\ndata: /message\n\n")
		w.(http.Flusher).Flush()
		moved := move
		for {
			select {
			case msg := <-f.out:
				_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
			case <-moved:
				_, _ = fmt.Fprintf(w, "event: endpoint\ndata: %s/message\n\n", other.URL)
				moved = nil
			case <-r.Context().Done():
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	inst := startRemote(t, config.TransportSSE, srv.URL+"/sse", Options{})
	close(move)
	select {
	case <-inst.Done():
	case <-time.After(waitTimeout):
		t.Fatal("the connection outlived an endpoint on another origin")
	}
	require.Error(t, inst.Err())
	assert.Contains(t, inst.Err().Error(), "another origin ("+other.URL+")")
	_, err := inst.CallTool(testContext(t), Call{Name: "t"})
	assert.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, hits.Load(), "the other origin was sent a request")
}
