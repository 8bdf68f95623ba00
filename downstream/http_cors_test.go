package downstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

func preflight(origin, method, headers string) map[string]string {
	return map[string]string{"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}
}

func TestHTTPBrowserPageOfAnAllowedOrigin(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{AllowedOrigins: []string{"https://app.example"}})
	const app = "https://app.example"

	// The preflight of a POST with the transport's headers is answered.
	resp := s.request(t, http.MethodOptions, "", preflight(app, "POST", "content-type, mcp-session-id, mcp-protocol-version"))
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")
	assert.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "DELETE")
	assert.Equal(t, "content-type, mcp-session-id, mcp-protocol-version", resp.Header.Get("Access-Control-Allow-Headers"))
	assert.Contains(t, resp.Header.Values("Vary"), "Origin")

	// The page can read the session id of its initialize, and its answers.
	resp = s.post(t, initializeBody, map[string]string{"Origin": app})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id")
	id := resp.Header.Get(headerSessionID)
	readMessage(t, resp)
	resp = s.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Origin": app, headerSessionID: id})
	assert.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Nil(t, readMessage(t, resp).Error)

	// Another origin gets neither an answer to its preflight nor CORS headers.
	resp = s.request(t, http.MethodOptions, "", preflight("https://evil.example", "POST", "content-type"))
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	requireRefused(t, resp, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "http.allowed_origins")
	// Nor does a plain OPTIONS, which is no preflight.
	resp = s.request(t, http.MethodOptions, "", map[string]string{"Origin": app})
	requireRefused(t, resp, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "use POST")
	assert.Equal(t, []string{"initialize", "tools/list"}, h.seen())
}

func TestHTTPCORSAnswersPreflightsBeforeAuthentication(t *testing.T) {
	tr := NewHTTP(newHTTPFake(), HTTPOptions{AllowedOrigins: []string{"https://app.example"}})
	t.Cleanup(func() { _ = tr.Shutdown(t.Context()) })
	authenticate := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
		http.Error(w, "no token", http.StatusUnauthorized)
	}
	h := tr.CORS(http.HandlerFunc(authenticate))
	serve := func(method string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:1/mcp", strings.NewReader(""))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := serve(http.MethodOptions, preflight("https://app.example", "POST", "authorization, content-type"))
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Equal(t, "https://app.example", w.Header().Get("Access-Control-Allow-Origin"))

	// The refusal for want of credentials reaches the page, readable.
	w = serve(http.MethodPost, map[string]string{"Origin": "https://app.example"})
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Equal(t, "https://app.example", w.Header().Get("Access-Control-Allow-Origin"))
	assert.Contains(t, w.Header().Get("Access-Control-Expose-Headers"), "WWW-Authenticate")

	w = serve(http.MethodOptions, preflight("https://evil.example", "POST", "content-type"))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
}

// The gateway's endpoint checks Host and Origin and answers preflights
// before what it puts between the checks and the transport
// (authentication), as Guard and CORS around it did.
func TestHTTPEndpointChecksBeforeInner(t *testing.T) {
	const app = "https://app.example"
	h := newHTTPFake()
	var inner atomic.Int32
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.Add(1)
			if r.Header.Get("Authorization") != "Bearer t" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tr := NewHTTP(h, HTTPOptions{AllowedOrigins: []string{app}})
	mux := http.NewServeMux()
	mux.Handle("/mcp", tr.Endpoint(authenticate))
	s := &httpServer{tr: tr, h: h, addr: ln.Addr().String(), url: "http://" + ln.Addr().String() + "/mcp",
		client: &http.Client{Transport: &http.Transport{}}, served: make(chan error, 1)}
	go func() { s.served <- tr.Serve(ln, mux) }()
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, tr.Shutdown(ctx))
		assert.NoError(t, s.serveResult(t))
	})
	_, port, _ := net.SplitHostPort(s.addr)
	plainRefusal := func(resp *http.Response, hint string) {
		t.Helper()
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), resp.Header.Get("Content-Type"))
		assert.Contains(t, string(body), hint)
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	plainRefusal(s.post(t, initializeBody, map[string]string{"Host": "evil.example:" + port, "Authorization": "Bearer t"}), "not a loopback name")
	plainRefusal(s.post(t, initializeBody, map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer t"}), "http.allowed_origins")
	plainRefusal(s.request(t, http.MethodOptions, "", preflight("https://evil.example", "POST", "content-type")), "http.allowed_origins")
	assert.Zero(t, inner.Load(), "a refused request reached authentication")

	resp := s.request(t, http.MethodOptions, "", preflight(app, "POST", "authorization, content-type"))
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Zero(t, inner.Load(), "a preflight reached authentication")

	// Authentication's refusal reaches the page, readable.
	resp = s.post(t, initializeBody, map[string]string{"Origin": app})
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate")
	assert.Empty(t, h.seen())

	// With credentials the request is served, once.
	resp = s.post(t, initializeBody, map[string]string{"Origin": app, "Authorization": "Bearer t"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{app}, resp.Header.Values("Access-Control-Allow-Origin"))
	assert.Equal(t, []string{"Origin"}, resp.Header.Values("Vary"))
	assert.NotEmpty(t, resp.Header.Get(headerSessionID))
	readMessage(t, resp)
	assert.Equal(t, []string{"initialize"}, h.seen())
	assert.EqualValues(t, 2, inner.Load())
}
