package downstream

import (
	"context"
	"net/http"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// viewKey carries the view a request came to in its context.
type viewKey struct{}

// WithView returns ctx naming the view (/mcp/<view>) an HTTP request came
// to; the gateway sets it for any path but /mcp.
func WithView(ctx context.Context, view string) context.Context {
	return context.WithValue(ctx, viewKey{}, view)
}

// ViewOf returns the view WithView put in ctx, "" for none.
func ViewOf(ctx context.Context) string {
	v, _ := ctx.Value(viewKey{}).(string)
	return v
}

// Principal implements Session: who opened the session.
func (s *httpSession) Principal() identity.Principal { return s.principal }

// Principal implements Session: stdio is the local user's own connection
// and names no client, so no profile applies to it.
func (s *stdioSession) Principal() identity.Principal { return identity.Local() }

// Caller implements CallerSession: who opened the session, with the client
// and claims of the credentials it was opened with.
func (s *httpSession) Caller() identity.Caller { return s.caller }

// Caller implements CallerSession: the local user.
func (s *stdioSession) Caller() identity.Caller { return identity.LocalCaller() }

// View implements CallerSession: the view the session was opened at.
func (s *httpSession) View() string { return s.view }

// View implements CallerSession: stdio has none.
func (s *stdioSession) View() string { return "" }

// checkClient refuses a request for a session another principal opened, as
// if the session did not exist: a token of one client or user never
// drives, or even confirms, another's session, not even a token of
// another user of the same OAuth client.
func (s *httpSession) checkClient(r *http.Request) *httpError {
	c := carriedBy(r)
	return s.checkCaller(&c)
}

// checkCaller is checkClient of a request that carries c.
func (s *httpSession) checkCaller(c *carried) *httpError {
	if !sameOwner(c.caller.Principal, s.principal) || c.view != s.view {
		return sessionGone() // word for word: the answer must not tell the two apart
	}
	return nil
}

// carried is what the context of a request says of it that serving it
// asks for, looked up once: the caller the gateway authenticated, the view
// it came to, the connection it arrived on.
type carried struct {
	caller identity.Caller
	view   string
	conn   *countedConn // connOf
}

func carriedBy(r *http.Request) carried {
	ctx := r.Context()
	return carried{caller: identity.CallerOf(ctx), view: ViewOf(ctx), conn: connOf(ctx)}
}

// sameOwner reports whether a request authenticated as who (the zero
// Principal without authentication) may use a session opened by owner.
func sameOwner(who, owner identity.Principal) bool {
	if !owner.Authenticated() {
		return !who.Authenticated()
	}
	return who == owner
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
