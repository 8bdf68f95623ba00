package credential

import (
	"net/http"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

// Headers returns a transport that sets, on each request to origin, the
// per-principal headers of a server (header name -> what of the caller,
// see Caller.Value) from the Caller of that request's context. A request
// with no Caller, or whose Caller lacks a part, goes without that header:
// no request ever carries another caller's value, nor a value the
// connection kept from an earlier request. Requests to another origin (a
// redirect) get none.
func Headers(next http.RoundTripper, origin string, headers map[string]string) http.RoundTripper {
	return &headerTransport{next: next, origin: origin, headers: headers}
}

type headerTransport struct {
	next    http.RoundTripper
	origin  string
	headers map[string]string
}

// RoundTrip implements http.RoundTripper.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if sameorigin.Origin(req.URL) != t.origin {
		return t.next.RoundTrip(req)
	}
	caller := identity.CallerOf(req.Context())
	req = req.Clone(req.Context())
	for name, what := range t.headers {
		req.Header.Del(name)
		if v, ok := Value(caller, what); ok {
			req.Header.Set(name, v)
		}
	}
	return t.next.RoundTrip(req)
}
