package downstream

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// checkHost guards a loopback listener against DNS rebinding: a web page
// whose host name an attacker re-points at 127.0.0.1 reaches the server
// with its own name in Host, so on a loopback connection only loopback
// names are accepted.
//
// conn is the connection r arrived on when it is known (connOf), which
// knows whether it was accepted on loopback; else the server's context
// tells.
func checkHost(r *http.Request, conn *countedConn) *httpError {
	if r.Host == "" || loopbackHost(r.Host) {
		return nil
	}
	if conn != nil && !conn.loopback {
		return nil
	}
	if conn == nil {
		if local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr); !loopbackAddr(local) {
			return nil
		}
	}
	return refusal(http.StatusForbidden, jsonrpc.CodeInvalidRequest,
		"Host %q is not a loopback name but the server listens on loopback: connect through localhost or 127.0.0.1", r.Host)
}

func loopbackAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	switch host {
	case "127.0.0.1", "localhost", "::1": // what local clients send, known without parsing
		return true
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkSource refuses a request whose Host or Origin the endpoint does not
// serve (checkHost, checkOrigin); conn is as checkHost's.
func (t *HTTP) checkSource(r *http.Request, conn *countedConn) *httpError {
	if e := checkHost(r, conn); e != nil {
		return e
	}
	return t.checkOrigin(r)
}

// checkOrigin accepts a request without Origin, from the server's own
// origin (the host and port the request addressed) or from an allowed one.
func (t *HTTP) checkOrigin(r *http.Request) *httpError {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	if o, ok := normalizeOrigin(origin); ok {
		scheme, _, _ := strings.Cut(o, "://")
		if own, ok := normalizeOrigin(scheme + "://" + r.Host); ok && own == o {
			return nil
		}
		if slices.Contains(*t.origins.Load(), o) {
			return nil
		}
	}
	return refusal(http.StatusForbidden, jsonrpc.CodeInvalidRequest,
		"Origin %q is not allowed: add it to http.allowed_origins to let that web page call this server", origin)
}

// normalizeOrigin returns s as scheme://host[:port] with the scheme and host
// in lower case and a default port dropped, or false when s is no origin.
func normalizeOrigin(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(s), "/"))
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	return scheme + "://" + host, true
}

// singleHeaders are the transport's headers that carry one value. Sent
// twice, the server would act on one and an intermediary might route on the
// other, which is what the checks of Mcp-Method and Mcp-Name against the
// body exist to prevent.
var singleHeaders = [...]string{headerSessionID, headerProtocol, headerMethod, headerName, headerLastEventID, HeaderLease}

// singleKeys are singleHeaders as net/http keys them (Last-Event-ID is
// stored as Last-Event-Id), so that the check of every request looks them
// up without canonicalizing, and allocating, a name per request.
var singleKeys = func() (keys [len(singleHeaders)]string) {
	for i, name := range singleHeaders {
		keys[i] = http.CanonicalHeaderKey(name)
	}
	return keys
}()

// checkRepeated refuses a request that sends one of singleHeaders more
// than once.
// A header of those protocol 2026-07-28 mirrors from the body
// (MCP-Protocol-Version, Mcp-Method, Mcp-Name) sent twice by a request of
// that generation is a malformed header, -32020 (HeaderMismatch).
func checkRepeated(r *http.Request) *httpError {
	for i, name := range singleHeaders {
		if n := len(r.Header[singleKeys[i]]); n > 1 {
			code := jsonrpc.CodeInvalidRequest
			if mirrored(name) && slices.ContainsFunc(r.Header.Values(headerProtocol), protocol.Modern) {
				code = codeHeaderMismatch
			}
			return refusal(http.StatusBadRequest, code, "the %s header appears %d times: send it once", name, n)
		}
	}
	return nil
}

// mirrored reports whether protocol 2026-07-28 defines a header as a copy
// of a member of the body.
func mirrored(header string) bool {
	return header == headerProtocol || header == headerMethod || header == headerName
}

// jsonContent reports whether the request body is declared as JSON.
func jsonContent(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if strings.EqualFold(ct, "application/json") {
		return true // the usual header, without parameters: nothing to parse
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// mediaRange is one media range of an Accept header, lower case, and
// whether it admits anything (it parses, and its q is not 0). The usual
// ranges, without parameters, need no parsing.
func mediaRange(part string) (string, bool) {
	for _, usual := range [...]string{"application/json", "text/event-stream", "*/*"} {
		if strings.EqualFold(part, usual) {
			return usual, true
		}
	}
	mt, params, err := mime.ParseMediaType(part)
	if err != nil {
		return "", false
	}
	if qs, ok := params["q"]; ok {
		if q, err := strconv.ParseFloat(qs, 64); err == nil && q <= 0 {
			return "", false
		}
	}
	return mt, true
}

// accepts reports which response shapes the client's Accept header admits:
// a JSON body, an SSE stream. A missing or empty header admits both.
func accepts(r *http.Request) (json, sse bool) {
	header := strings.TrimSpace(strings.Join(r.Header.Values("Accept"), ","))
	if header == "" {
		return true, true
	}
	for part := range strings.SplitSeq(header, ",") {
		mt, ok := mediaRange(strings.TrimSpace(part))
		if !ok {
			continue
		}
		switch mt {
		case "*/*":
			json, sse = true, true
		case "application/json", "application/*":
			json = true
		case "text/event-stream", "text/*":
			sse = true
		}
	}
	return json, sse
}

// Guard gives an endpoint served beside the MCP one (probes, metrics, the
// status pages, POST /drain) the MCP endpoint's Host and Origin checks: a
// web page must neither read what the gateway runs, through a name it
// re-pointed at loopback, nor stop it with a cross-site form post. A
// refusal is plain text, as the endpoints' own answers are.
func (t *HTTP) Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := t.checkSource(r, acceptedOf(r.Context())); e != nil {
			t.refusePlain(w, r, e)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// refusePlain answers a request Guard refuses, in plain text.
func (t *HTTP) refusePlain(w http.ResponseWriter, r *http.Request, e *httpError) {
	t.log.Info("refused a request", "path", clip(r.URL.Path), "method", clip(r.Method), "status", e.status, "reason", clip(e.err.Message))
	http.Error(w, e.err.Message, e.status)
}

// Endpoint is the MCP endpoint as the gateway serves it, with inner (its
// authentication, a view) between the checks of where a request comes
// from and the transport, each check made once per request: the Host and
// Origin checks of Guard, refused as Guard refuses, then the CORS headers
// and the answer to a preflight of CORS, both before inner, which a
// browser's preflight never gets past with credentials; then inner; then
// ServeHTTP without those checks again.
func (t *HTTP) Endpoint(inner func(http.Handler) http.Handler) http.Handler {
	served := inner(http.HandlerFunc(t.serveChecked))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := t.checkSource(r, acceptedOf(r.Context())); e != nil {
			t.refusePlain(w, r, e)
			return
		}
		if corsHeaders(w, r) {
			return // a browser's preflight, from an allowed origin
		}
		served.ServeHTTP(w, r)
	})
}
