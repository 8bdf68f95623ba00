package downstream

import (
	"context"
	"net/http"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// callerKey carries the authenticated caller in a request's context.
type callerKey struct{}

// WithCaller returns ctx naming who an HTTP request was authenticated as.
// The gateway's authentication sets it before the request reaches the
// transport; the transport binds a session to the principal that opened
// it.
func WithCaller(ctx context.Context, c identity.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller WithCaller put in ctx, or the zero Caller
// when the request was not authenticated (no http.auth).
func CallerOf(ctx context.Context) identity.Caller {
	c, _ := ctx.Value(callerKey{}).(identity.Caller)
	return c
}

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

// WithClient returns ctx naming the static token's client an HTTP request
// was authenticated as (WithCaller of identity.ClientCaller).
func WithClient(ctx context.Context, client string) context.Context {
	return WithCaller(ctx, identity.ClientCaller(client))
}

// ClientOf returns the client the request in ctx was authenticated
// through: a static token's name or an OAuth client (client_id, else azp);
// "" without authentication or when a token names no client.
func ClientOf(ctx context.Context) string { return CallerOf(ctx).Client }

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
	if !sameOwner(CallerOf(r.Context()).Principal, s.principal) || ViewOf(r.Context()) != s.view {
		return sessionGone() // word for word: the answer must not tell the two apart
	}
	return nil
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
