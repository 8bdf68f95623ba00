package downstream

import (
	"context"
	"net/http"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
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

// Principal implements Session: who opened the session.
func (s *httpSession) Principal() identity.Principal { return s.principal }

// Principal implements Session: stdio is the local user's own connection
// and names no client, so no profile applies to it.
func (s *stdioSession) Principal() identity.Principal { return identity.Local() }

// checkClient refuses a request for a session another client opened, as if
// the session did not exist: a token of one client never drives, or even
// confirms, another client's session.
func (s *httpSession) checkClient(r *http.Request) *httpError {
	if ClientOf(r.Context()) != s.principal.Client() {
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
		if c := s.principal.Client(); c != "" && gone(c) {
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
