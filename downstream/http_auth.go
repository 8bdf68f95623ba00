package downstream

import (
	"context"
	"net/http"
	"time"
)

// clientKey carries the authenticated client's name in a request's context.
type clientKey struct{}

// WithClient returns ctx naming the client an HTTP request was
// authenticated as. The gateway's authentication sets it before the
// request reaches the transport; the transport binds a session to the
// client that opened it.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

// ClientOf returns the client name WithClient put in ctx, or "" when the
// request was not authenticated (no http.auth).
func ClientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}

// Client implements Session: the client that opened the session.
func (s *httpSession) Client() string { return s.client }

// Client implements Session: stdio is the local user's own connection and
// names no client, so no profile applies to it.
func (s *stdioSession) Client() string { return "" }

// checkClient refuses a request for a session another client opened, as if
// the session did not exist: a token of one client never drives, or even
// confirms, another client's session.
func (s *httpSession) checkClient(r *http.Request) *httpError {
	if ClientOf(r.Context()) != s.client {
		return sessionGone() // word for word: the answer must not tell the two apart
	}
	return nil
}

// EndSessionsOf ends every session opened by a client for which gone
// reports true, such as one whose credentials were withdrawn: its streams
// close, its pending requests to the client fail, and the Handler is told
// the session closed. It returns how many sessions ended.
func (t *HTTP) EndSessionsOf(gone func(client string) bool, why string) int {
	t.mu.Lock()
	var doomed []*httpSession
	for _, s := range t.sessions {
		if s.client != "" && gone(s.client) {
			doomed = append(doomed, s)
		}
	}
	t.mu.Unlock()
	n := 0
	for _, s := range doomed {
		if t.endSession(s, time.Time{}, why) {
			n++
		}
	}
	return n
}
