package credential

import (
	"net/http"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// ByCaller returns a transport that sends a request made for an
// authenticated caller (identity.CallerOf its context) through caller's,
// and a request no caller made (the server's initialize, the lists the
// aggregator keeps, pings, the GET stream) through service's: each
// caller's own credentials on their calls, the aggregator's own on the
// rest.
func ByCaller(caller, service http.RoundTripper) http.RoundTripper {
	return &byCaller{caller: caller, service: service}
}

type byCaller struct{ caller, service http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t *byCaller) RoundTrip(req *http.Request) (*http.Response, error) {
	if identity.CallerOf(req.Context()).Principal.Authenticated() {
		return t.caller.RoundTrip(req)
	}
	return t.service.RoundTrip(req)
}
