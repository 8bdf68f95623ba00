package identity

import "context"

// Caller is a principal with what its credentials said beside it: the
// client it called through and, for an OAuth access token, the token's
// verified claims. The principal alone decides what is whose (sessions,
// leases, tasks, shares); the client and claims choose profiles and feed
// policy; the token is what a token exchange trades for an upstream's.
type Caller struct {
	Principal Principal
	// Client is the OAuth client the token was issued to (client_id, else
	// azp; "" when it names none), or the static token's client name.
	Client string
	// Claims are the access token's verified claims, read-only; nil for a
	// static token and without authentication.
	Claims map[string]any
	// Token is the caller's verified OAuth access token; zero for a static
	// token's client and without authentication. It never prints.
	Token Secret
}

// LocalCaller is the local user, with no client and no claims.
func LocalCaller() Caller { return Caller{Principal: Local()} }

// ClientCaller is the static token's client name.
func ClientCaller(name string) Caller {
	return Caller{Principal: Client(name), Client: name}
}

// callerKey carries a request's Caller in its context.
type callerKey struct{}

// WithCaller returns ctx naming who a request was authenticated as. The
// gateway's authentication sets it before an HTTP request reaches the
// downstream transport; everything below reads it there: the transport
// binds a session to its principal, and the upstream transports send the
// caller's own credentials (per-principal headers, token exchange,
// per-user logins) on the requests made for it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the Caller WithCaller put in ctx, or the zero Caller
// (no principal) when nothing authenticated the request: stdio, a gateway
// without http.auth, work no client asked for.
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}
