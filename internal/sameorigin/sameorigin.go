package sameorigin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects is how many redirects a guarded client follows when the
// client it was made from has no CheckRedirect of its own (Go's default).
const maxRedirects = 10

// Origin is u's scheme, host and port, lower case, with the default port
// spelled out, so that two spellings of one origin compare equal. "" for a
// URL with no host.
func Origin(u *url.URL) string {
	if u == nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// Policy says what a guarded client does with a redirect that leaves the
// origin of the request it started with.
type Policy struct {
	// Headers are the names of the headers that are credentials for the
	// first origin alone (the configured headers of a server), dropped
	// along with Authorization, Cookie and Proxy-Authorization.
	Headers []string
	// NoBody: a redirect that would send the request's body again (307,
	// 308) to another origin is not followed; the client returns the
	// redirect itself. For requests whose body is a secret (a code
	// exchange, a client secret).
	NoBody bool
	// RefuseBody: such a redirect fails the request with an error naming
	// both origins. For requests whose body is the user's data (the
	// arguments of a tool call), which the origin configured was trusted
	// with and another was not.
	RefuseBody bool
}

// HeaderNames are the names of the headers of a config's headers: map.
func HeaderNames(headers map[string]string) []string {
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	return names
}

// Client is a copy of client (nil: a zero http.Client) whose redirects to
// another origin than the first request's follow p. Redirects within the
// origin are followed as before, and the client's own CheckRedirect, if
// any, still has the last word.
func Client(client *http.Client, p Policy) *http.Client {
	var c http.Client
	if client != nil {
		c = *client
	}
	next := c.CheckRedirect
	names := append([]string{"Authorization", "Proxy-Authorization", "Cookie"}, p.Headers...)
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && Origin(req.URL) != Origin(via[0].URL) {
			if req.Body != nil && req.Body != http.NoBody {
				switch {
				case p.NoBody:
					_ = req.Body.Close()
					return http.ErrUseLastResponse
				case p.RefuseBody:
					_ = req.Body.Close()
					return fmt.Errorf("%s redirected the request to %s, another origin; its body is not sent there (set url: to where the server is)",
						Origin(via[0].URL), Origin(req.URL))
				}
			}
			// The headers of each hop are copied from the first request
			// again, so a hop back to the first origin gets them back.
			for _, name := range names {
				req.Header.Del(name)
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &c
}

// Headers returns a RoundTripper that sets headers (a server's configured
// headers) on every request to origin (see Origin) before next sends it,
// and on no request to any other origin. It works below whoever built the
// request, so that every request to the server carries them, those a
// library builds on its own included, and a redirect to another origin
// gets none of them: Go's client copies the headers of the request it was
// given, which do not hold these. An empty origin matches nothing. The
// request it is given is not changed.
func Headers(next http.RoundTripper, origin string, headers map[string]string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if origin == "" || len(headers) == 0 {
		return next
	}
	return &headerTransport{next: next, origin: origin, headers: headers}
}

type headerTransport struct {
	next    http.RoundTripper
	origin  string
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if Origin(req.URL) != t.origin {
		return t.next.RoundTrip(req)
	}
	out := req.Clone(req.Context()) // the body stays shared: next closes it
	for k, v := range t.headers {
		out.Header.Set(k, v)
	}
	return t.next.RoundTrip(out)
}
