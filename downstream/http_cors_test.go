package downstream

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
