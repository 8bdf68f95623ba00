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
	// KindClient is a client authenticated by an http.auth static token,
	// named by the token's key.
	KindClient
	// KindAddress is an unauthenticated caller told apart by the address
	// its connection came from (HTTP with clients counted by address).
	KindAddress
	// KindSubject is the user (or service) an OAuth access token was
	// issued for: its issuer and subject (iss, sub). Two users of one OAuth
	// client are two principals; the client is beside the principal, in
	// Caller.Client.
	KindSubject
)

// Principal is who is calling: a kind and, for a static token's client or
// an address, its name; for an OAuth subject, the issuer and subject.
// Principals are comparable values, usable as map keys; two of different
// kinds differ even when their names are equal, so a subject that equals
// a static token's name is another principal.
type Principal struct {
	Kind Kind
	// Issuer and Subject are the access token's iss and sub (KindSubject);
	// "" for any other kind.
	Issuer  string
	Subject string
	// Name is the static token's client name or the address's host; ""
	// for the local user, a subject and no one.
	Name string
}

// Local is whoever runs the aggregator.
func Local() Principal { return Principal{Kind: KindLocal} }

// Client is the client authenticated by the static token named name;
// Local when name is "", as requests are without authentication.
func Client(name string) Principal {
	if name == "" {
		return Local()
	}
	return Principal{Kind: KindClient, Name: name}
}

// Subject is the OAuth subject sub of issuer iss.
func Subject(iss, sub string) Principal {
	return Principal{Kind: KindSubject, Issuer: iss, Subject: sub}
}

// Address is the unauthenticated caller at host.
func Address(host string) Principal { return Principal{Kind: KindAddress, Name: host} }

// IsZero reports whether p is no one.
func (p Principal) IsZero() bool { return p == Principal{} }

// Authenticated reports whether p was named by credentials: a static
// token's client or an OAuth subject.
func (p Principal) Authenticated() bool { return p.Kind == KindClient || p.Kind == KindSubject }

// Client is the name of the static token's client p is; "" for any other
// principal.
func (p Principal) Client() string {
	if p.Kind != KindClient {
		return ""
	}
	return p.Name
}

// String names p for logs and errors: `client:"NAME"` (the name quoted, so
// that any name reads back unambiguously), `subject:"ISS" "SUB"`,
// `address:HOST`, `local`, and "" for no one.
func (p Principal) String() string {
	switch p.Kind {
	case KindLocal:
		return "local"
	case KindClient:
		return "client:" + strconv.Quote(p.Name)
	case KindSubject:
		return "subject:" + strconv.Quote(p.Issuer) + " " + strconv.Quote(p.Subject)
	case KindAddress:
		return "address:" + p.Name
	}
	return ""
}

// MarshalText writes String, so that JSON and text logs show p as it reads.
func (p Principal) MarshalText() ([]byte, error) { return []byte(p.String()), nil }
