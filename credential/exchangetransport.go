package credential

import (
	"net/http"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sameorigin"
)

// ExchangeTransport returns a transport that sends each request to origin
// with the bearer token ex gives the request's Caller, in place of any
// Authorization the request had. A request no caller made (the server's
// initialize, the lists the aggregator keeps, pings, the GET stream)
// carries the aggregator's own token when ex serves one (auth.service),
// else none. A 401 makes ex forget the token it gave, so that the next
// request gets another. Requests to another origin get no token.
func ExchangeTransport(next http.RoundTripper, origin string, ex *Exchanger) http.RoundTripper {
	return &exchangeTransport{next: next, origin: origin, ex: ex}
}

type exchangeTransport struct {
	next   http.RoundTripper
	origin string
	ex     *Exchanger
}

// RoundTrip implements http.RoundTripper.
func (t *exchangeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Header.Del("Authorization")
	caller := identity.CallerOf(req.Context())
	if sameorigin.Origin(req.URL) != t.origin || (caller.Principal.IsZero() && !t.ex.Serves()) {
		return t.next.RoundTrip(out)
	}
	var tok identity.Secret
	var err error
	if caller.Principal.IsZero() {
		tok, err = t.ex.ServiceToken(req.Context())
	} else {
		tok, err = t.ex.Token(req.Context(), caller)
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	out.Header.Set("Authorization", "Bearer "+tok.Reveal())
	resp, err := t.next.RoundTrip(out)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.ex.Forget(caller, tok)
	}
	return resp, err
}
