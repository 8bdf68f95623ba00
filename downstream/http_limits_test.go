package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// dial opens a raw connection to the server.
func (s *httpServer) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// rawPost writes a POST's head with the given extra header lines, then body.
func (s *httpServer) rawPost(t *testing.T, c net.Conn, extra, body string) {
	t.Helper()
	_, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+s.addr+"\r\nContent-Type: application/json\r\n"+extra+"\r\n"+body)
	require.NoError(t, err)
}

// readResponse reads one response from c, failing after a few seconds.
func readResponse(t *testing.T, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	return resp
}

// requireClosed waits for the server to close c.
func requireClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := br.ReadByte()
	require.ErrorIs(t, err, io.EOF)
}

func TestHTTPDeclaredBodyTooLargeIsRefusedUnread(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{MaxBodyBytes: 1024})
	c := s.dial(t)
	br := bufio.NewReader(c)

	// 100 MB announced, none sent: the answer cannot wait for the body.
	s.rawPost(t, c, "Content-Length: 100000000\r\n", "")
	resp := readResponse(t, c, br)
	requireRefused(t, resp, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, "exceeds 1024 bytes (http.max_body_bytes)")
	requireClosed(t, c, br)
	assert.Empty(t, h.seen())
}

func TestHTTPChunkedBodyOverTheCap(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{MaxBodyBytes: 1024})
	c := s.dial(t)
	br := bufio.NewReader(c)

	// No length announced: the body grows past the cap while it is read.
	s.rawPost(t, c, "Transfer-Encoding: chunked\r\n", "")
	chunk := "400\r\n" + strings.Repeat("x", 0x400) + "\r\n"
	_, err := io.WriteString(c, chunk+chunk+chunk)
	require.NoError(t, err)
	resp := readResponse(t, c, br)
	requireRefused(t, resp, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, "exceeds 1024 bytes (http.max_body_bytes)")
	requireClosed(t, c, br)
	assert.Empty(t, h.seen())

	// A body within the cap is served.
	resp = s.post(t, initializeBody, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
}

func TestHTTPSlowBodyIsCutOff(t *testing.T) {
	const timeout = 100 * time.Millisecond
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{BodyReadTimeout: timeout})
	c := s.dial(t)
	br := bufio.NewReader(c)

	start := time.Now()
	s.rawPost(t, c, "Content-Length: 100\r\n", `{"jsonrpc":`) // and the rest never comes
	resp := readResponse(t, c, br)
	assert.GreaterOrEqual(t, time.Since(start), timeout)
	requireRefused(t, resp, http.StatusRequestTimeout, jsonrpc.CodeInvalidRequest, "send the whole body at once")
	requireClosed(t, c, br)
	assert.Empty(t, h.seen())
}

func TestHTTPIdleKeepAliveIsClosed(t *testing.T) {
	const idle = 100 * time.Millisecond
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{IdleTimeout: idle})
	c := s.dial(t)
	br := bufio.NewReader(c)

	s.rawPost(t, c, "Content-Length: "+itoa(len(initializeBody))+"\r\n", initializeBody)
	resp := readResponse(t, c, br)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	start := time.Now()
	requireClosed(t, c, br)
	assert.GreaterOrEqual(t, time.Since(start), idle/2)
}

func TestHTTPConnectionCapPerClient(t *testing.T) {
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{MaxConnsPerClient: 2})

	// served opens a connection and completes a request on it, so that the
	// server holds it open (keep-alive) and counts it.
	served := func() (net.Conn, *bufio.Reader, bool) {
		c := s.dial(t)
		br := bufio.NewReader(c)
		s.rawPost(t, c, "Content-Length: "+itoa(len(initializeBody))+"\r\n", initializeBody)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return c, br, false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return c, br, resp.StatusCode == http.StatusOK
	}
	first, _, ok := served()
	require.True(t, ok)
	_, _, ok = served()
	require.True(t, ok)

	// The third is answered 429 before it says anything, then closed.
	third := s.dial(t)
	br := bufio.NewReader(third)
	resp := readResponse(t, third, br)
	requireRefused(t, resp, http.StatusTooManyRequests, jsonrpc.CodeInvalidRequest, "reuse or close connections")
	requireClosed(t, third, br)

	// Closing one frees its slot.
	first.Close()
	eventually(t, func() bool { _, _, ok := served(); return ok }, "a freed connection slot")
}

func TestHTTPOrigin(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{AllowedOrigins: []string{"HTTPS://App.Example:443/", "not an origin"}})
	status := func(origin string) int {
		resp := s.post(t, initializeBody, map[string]string{"Origin": origin})
		defer resp.Body.Close()
		return resp.StatusCode
	}

	assert.Equal(t, http.StatusOK, status(""), "no Origin")
	assert.Equal(t, http.StatusOK, status("http://"+s.addr), "own origin")
	assert.Equal(t, http.StatusOK, status("https://app.example"), "allowed origin")
	before := len(h.seen())
	resp := s.post(t, initializeBody, map[string]string{"Origin": "http://evil.example"})
	requireRefused(t, resp, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "http.allowed_origins")
	assert.Equal(t, http.StatusForbidden, status("null"))
	assert.Equal(t, http.StatusForbidden, status("http://"+s.addr+".evil.example"))
	assert.Len(t, h.seen(), before)

	// A reload changes the list.
	s.tr.SetAllowedOrigins([]string{"http://evil.example"})
	assert.Equal(t, http.StatusOK, status("http://evil.example"))
	assert.Equal(t, http.StatusForbidden, status("https://app.example"))
}

func TestHTTPHostOnLoopback(t *testing.T) {
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{})
	_, port, _ := net.SplitHostPort(s.addr)

	resp := s.post(t, initializeBody, map[string]string{"Host": "evil.example:" + port})
	requireRefused(t, resp, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "not a loopback name")
	// A rebinding page's Origin matches its Host; the Host check still holds.
	resp = s.post(t, initializeBody, map[string]string{"Host": "evil.example:" + port, "Origin": "http://evil.example:" + port})
	requireRefused(t, resp, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "not a loopback name")

	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "LOCALHOST"} {
		resp = s.post(t, initializeBody, map[string]string{"Host": host})
		assert.Equal(t, http.StatusOK, resp.StatusCode, host)
		resp.Body.Close()
	}
}

func TestNormalizeOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://Example.COM":        "http://example.com",
		"https://example.com:443/":  "https://example.com",
		"http://example.com:80":     "http://example.com",
		"http://example.com:8080":   "http://example.com:8080",
		"http://[::1]:3000":         "http://[::1]:3000",
		"http://[::1]":              "http://[::1]",
		"null":                      "",
		"example.com":               "",
		"http://example.com/path":   "",
		"http://user@example.com":   "",
		"chrome-extension://abcdef": "chrome-extension://abcdef",
	} {
		got, ok := normalizeOrigin(in)
		assert.Equal(t, want, got, in)
		assert.Equal(t, want != "", ok, in)
	}
}

// TestHTTPProbesOverTheConnectionCap: a client at its cap still gets the
// probe paths, on at most probeReserve connections more, each closed after
// its answer; anything else on them is refused as the cap refuses, and a
// connection past the reserve is refused before it says anything.
func TestHTTPProbesOverTheConnectionCap(t *testing.T) {
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{MaxConnsPerClient: 1, ProbePaths: []string{"/probe"}})
	held := s.dial(t)
	s.rawPost(t, held, "Content-Length: "+itoa(len(initializeBody))+"\r\n", initializeBody)
	resp := readResponse(t, held, bufio.NewReader(held))
	require.Equal(t, http.StatusOK, resp.StatusCode)

	ask := func(c net.Conn, request string) (*http.Response, *bufio.Reader) {
		t.Helper()
		_, err := io.WriteString(c, request)
		require.NoError(t, err)
		br := bufio.NewReader(c)
		return readResponse(t, c, br), br
	}
	// A probe path reaches the server's handler (the test mux has no
	// /probe: 404), and the connection closes after it.
	probe := s.dial(t)
	resp, br := ask(probe, "GET /probe HTTP/1.1\r\nHost: "+s.addr+"\r\n\r\n")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.True(t, resp.Close, "a probe connection over the cap closes after its answer")
	_, _ = io.Copy(io.Discard, resp.Body)
	requireClosed(t, probe, br)
	// The MCP endpoint is refused on such a connection.
	other := s.dial(t)
	resp, br = ask(other, "POST /mcp HTTP/1.1\r\nHost: "+s.addr+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: "+itoa(len(initializeBody))+"\r\n\r\n"+initializeBody)
	requireRefused(t, resp, http.StatusTooManyRequests, jsonrpc.CodeInvalidRequest, "reuse or close connections")
	requireClosed(t, other, br)

	// The reserve taken by connections that say nothing, the next one is
	// refused at once.
	for i := range probeReserve {
		c := s.dial(t)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "probe connection %d of the reserve is refused: %v", i+1, err)
	}
	past := s.dial(t)
	br = bufio.NewReader(past)
	requireRefused(t, readResponse(t, past, br), http.StatusTooManyRequests, jsonrpc.CodeInvalidRequest, "reuse or close connections")
	requireClosed(t, past, br)
}

// A request that runs longer than BodyReadTimeout is not cut off: the
// server's read deadline, which bounds the arrival of the headers and the
// body, ends once the body is read, and the next request on the connection
// gets a deadline of its own.
func TestHTTPLongRequestOutlivesTheReadTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	h := newHTTPFake()
	ended := make(chan error, 2)
	h.handle = func(ctx context.Context, req *Request) *jsonrpc.Message {
		if req.Msg.Method == "initialize" {
			return &jsonrpc.Message{Result: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)}
		}
		select {
		case <-ctx.Done():
			ended <- context.Cause(ctx)
			return nil
		case <-time.After(4 * timeout): // well past the deadline of its arrival
		}
		res, _ := jsonrpc.Result(nil, map[string]string{"method": req.Msg.Method})
		return res
	}
	s := serveHTTP(t, h, HTTPOptions{BodyReadTimeout: timeout})
	id := s.initialize(t)
	for i := range 2 {
		resp := s.sessionPost(t, id, `{"jsonrpc":"2.0","id":`+itoa(i+2)+`,"method":"tools/call","params":{"name":"slow"}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.JSONEq(t, `{"method":"tools/call"}`, string(readMessage(t, resp).Result))
	}
	select {
	case err := <-ended:
		t.Fatalf("a request was cut off: %v", err)
	default:
	}
}

// A client that stops reading a JSON answer loses it within the write
// timeout: the write deadline in place (the server's, which the answer
// keeps while it leaves half the timeout) cuts the write off, and the
// request ends.
func TestHTTPJSONAnswerToAClientThatStopsReadingIsCut(t *testing.T) {
	big := strings.Repeat("x", 32<<20)
	started := make(chan struct{}, 1)
	h := newHTTPFake()
	h.handle = func(context.Context, *Request) *jsonrpc.Message {
		started <- struct{}{}
		res, _ := jsonrpc.Result(nil, map[string]string{"text": big})
		return res
	}
	s := serveHTTP(t, h, HTTPOptions{WriteTimeout: 100 * time.Millisecond})
	c := s.dial(t)
	body := modernBody("tools/list", "2026-07-28", "")
	hdr := "Content-Length: " + itoa(len(body)) + "\r\nAccept: application/json\r\n"
	for k, v := range modernHeaders("tools/list", "") {
		hdr += k + ": " + v + "\r\n"
	}
	s.rawPost(t, c, hdr, body)
	recv(t, started)
	require.Eventually(t, func() bool { return s.tr.InFlight() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the request ends although its answer could not be written")
	got, _ := io.ReadAll(c) // what the kernel took before the write was cut off, then the close
	assert.Less(t, len(got), len(big))
}
