package identity

// Caller is a principal with what its credentials said beside it: the
// client it called through and, for an OAuth access token, the token's
// verified claims. The principal alone decides what is whose (sessions,
// leases, tasks, shares); the client and claims choose profiles and feed
// policy.
type Caller struct {
	Principal Principal
	// Client is the OAuth client the token was issued to (client_id, else
	// azp; "" when it names none), or the static token's client name.
	Client string
	// Claims are the access token's verified claims, read-only; nil for a
	// static token and without authentication.
	Claims map[string]any
}

// LocalCaller is the local user, with no client and no claims.
func LocalCaller() Caller { return Caller{Principal: Local()} }

// ClientCaller is the static token's client name.
func ClientCaller(name string) Caller {
	return Caller{Principal: Client(name), Client: name}
}
