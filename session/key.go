package session

import "github.com/mcp-aggregator/mcp-aggregator/identity"

// KeyKind is what a lease Key is the key of.
type KeyKind uint8

// The kinds of lease key. The zero KeyKind is the zero Key: no lease.
const (
	KeyNone      KeyKind = iota
	KeySession           // a downstream session: ID is its key
	KeyNamed             // a sessionless conversation: ID is the name its requests give
	KeyAnonymous         // sessionless requests that name no conversation
)

// Key identifies who a lease is held for (see proxy.LeaseKey): a
// downstream session, a named sessionless conversation, or the anonymous
// one, each within the space of the authenticated client it belongs to.
// Keys are comparable values, used as map keys; the zero Key is no lease.
type Key struct {
	// Client is the authenticated client whose space the key is in
	// (identity.KindClient); the zero Principal without authentication
	// (stdio, no http.auth), where callers share one space.
	Client identity.Principal
	Kind   KeyKind
	// ID is the session's key (KeySession) or the conversation's name
	// (KeyNamed); "" otherwise.
	ID string
}

// SessionKey is the key of the downstream session id, in client's space.
func SessionKey(client identity.Principal, id string) Key {
	return Key{Client: client, Kind: KeySession, ID: id}
}

// NamedKey is the key of the sessionless conversation name, in client's
// space.
func NamedKey(client identity.Principal, name string) Key {
	return Key{Client: client, Kind: KeyNamed, ID: name}
}

// AnonymousKey is the key shared by client's sessionless requests that
// name no conversation.
func AnonymousKey(client identity.Principal) Key {
	return Key{Client: client, Kind: KeyAnonymous}
}

// IsZero reports whether k is no lease's.
func (k Key) IsZero() bool { return k == Key{} }

// SessionID is the downstream session k is the key of; ok is false for
// any other key.
func (k Key) SessionID() (id string, ok bool) {
	return k.ID, k.Kind == KeySession
}

// String names k for logs and status: `session:ID`, `meta:NAME` or
// `anonymous`, after `client:"NAME" ` when k is in a client's space; ""
// for the zero Key.
func (k Key) String() string {
	var s string
	switch k.Kind {
	case KeySession:
		s = "session:" + k.ID
	case KeyNamed:
		s = "meta:" + k.ID
	case KeyAnonymous:
		s = "anonymous"
	default:
		return ""
	}
	if k.Client.IsZero() {
		return s
	}
	return k.Client.String() + " " + s
}

// MarshalText writes String, so that JSON and text logs show k as it reads.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }
