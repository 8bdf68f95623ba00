package identity

import "strconv"

// Kind is the way a Principal was told apart from other callers.
type Kind uint8

// The kinds of principal. The zero Kind is no principal at all.
const (
	// KindNone is the zero Principal: no caller, as for work no request
	// asked for. It is a principal of no one's and is shared with no one.
	KindNone Kind = iota
	// KindLocal is whoever runs the aggregator: stdio, or an HTTP bind on
	// loopback without authentication.
	KindLocal
	// KindClient is an authenticated client, named by an http.auth token's
	// key or an OAuth client.
	KindClient
	// KindAddress is an unauthenticated caller told apart by the address
	// its connection came from (HTTP with clients counted by address).
	KindAddress
)

// Principal is who is calling: a kind and, for a client or an address, its
// name. Principals are comparable values, usable as map keys; two of
// different kinds differ even when their names are equal.
type Principal struct {
	Kind Kind
	// Name is the client's name or the address's host; "" for the local
	// user and for no one.
	Name string
}

// Local is whoever runs the aggregator.
func Local() Principal { return Principal{Kind: KindLocal} }

// Client is the authenticated client named name; Local when name is "",
// as requests are without authentication.
func Client(name string) Principal {
	if name == "" {
		return Local()
	}
	return Principal{Kind: KindClient, Name: name}
}

// Address is the unauthenticated caller at host.
func Address(host string) Principal { return Principal{Kind: KindAddress, Name: host} }

// IsZero reports whether p is no one.
func (p Principal) IsZero() bool { return p == Principal{} }

// Client is the name of the authenticated client p is; "" for any other
// principal.
func (p Principal) Client() string {
	if p.Kind != KindClient {
		return ""
	}
	return p.Name
}

// String names p for logs and errors: `client:"NAME"` (the name quoted, so
// that any name reads back unambiguously), `address:HOST`, `local`, and ""
// for no one.
func (p Principal) String() string {
	switch p.Kind {
	case KindLocal:
		return "local"
	case KindClient:
		return "client:" + strconv.Quote(p.Name)
	case KindAddress:
		return "address:" + p.Name
	}
	return ""
}

// MarshalText writes String, so that JSON and text logs show p as it reads.
func (p Principal) MarshalText() ([]byte, error) { return []byte(p.String()), nil }
