package downstream

import (
	"net/http"
	"strings"
)

// exposedHeaders are the response headers a browser page may read: the
// session id above all, without which it cannot go on past initialize.
const exposedHeaders = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After"

// CORS lets a web page from an allowed origin (the server's own, or one of
// http.allowed_origins) use the MCP endpoint from a browser: it answers the
// page's CORS preflight (OPTIONS) itself, before h, which would ask the
// preflight for credentials a browser never sends with one, and it lets the
// page read every response, refusals of h included. Requests from other
// origins pass to h unchanged, which refuses them (ServeHTTP does).
func (t *HTTP) CORS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" && t.checkSource(r, acceptedOf(r.Context())) == nil && corsHeaders(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// corsHeaders sets the CORS headers of a response to a request from an
// allowed origin, and answers it when it is a preflight, reporting so.
func corsHeaders(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	if !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
		h.Add("Vary", "Origin")
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Expose-Headers", exposedHeaders)
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	if asked := r.Header.Values("Access-Control-Request-Headers"); len(asked) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(asked, ", "))
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}
