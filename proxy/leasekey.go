package proxy

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// LeaseMetaKey is the _meta key a sessionless (protocol 2026-07-28) client
// sets on tools/call to name the conversation its leases belong to.
const LeaseMetaKey = downstream.MetaLease

// sessionLeaseKey is the lease key of a session's calls.
func sessionLeaseKey(s downstream.Session) session.Key {
	return session.SessionKey(leaseSpace(s.Principal()), s.Key())
}

// leaseSpace is the space p's lease keys are kept in: an authenticated
// principal's own (a static token's client, an OAuth subject: two users of
// one OAuth client have a space each); without authentication (stdio, no
// http.auth), the one space all callers share, addresses included.
func leaseSpace(p identity.Principal) identity.Principal {
	if !p.Authenticated() {
		return identity.Principal{}
	}
	return p
}

// LeaseKey says which downstream session a call belongs to, and so which
// leased instances it may use: the stdio connection or the HTTP session;
// for sessionless requests the string under LeaseMetaKey in the request's
// _meta; otherwise one shared anonymous key. anonymous reports the last
// case so the caller can warn once. A session's key includes the client
// that opened it; LeaseKeyOf also names the client of a sessionless
// request.
func LeaseKey(s downstream.Session, meta map[string]json.RawMessage) (key session.Key, anonymous bool) {
	var who identity.Principal
	if s != nil {
		who = s.Principal()
	}
	return leaseKey(who, s, meta[LeaseMetaKey])
}

// LeaseKeyOf is the lease key of req: LeaseKey, within the authenticated
// client's own keys, so that two clients never share a lease, not even
// the anonymous one or one named by the same _meta string.
func LeaseKeyOf(req *downstream.Request, meta map[string]json.RawMessage) (key session.Key, anonymous bool) {
	return leaseKeyOf(req, meta[LeaseMetaKey])
}

// leaseKeyOf is LeaseKeyOf of the request whose _meta[LeaseMetaKey] is
// lease, raw (nil: absent).
func leaseKeyOf(req *downstream.Request, lease json.RawMessage) (key session.Key, anonymous bool) {
	s := req.Session
	if req.Sessionless() {
		// A sessionless request names its conversation in _meta, over stdio
		// as over HTTP: the connection it came on is no session of its.
		s = nil
	}
	return leaseKey(req.Principal, s, lease)
}

// maxLeaseName bounds the conversation name a sessionless request gives
// under LeaseMetaKey: it is kept, with the lease, for as long as the lease.
const maxLeaseName = 256

// leaseNameError refuses a request whose lease name (raw, its
// _meta[LeaseMetaKey]; nil when absent), the one its leases would be kept
// under, is longer than maxLeaseName; nil otherwise.
func leaseNameError(req *downstream.Request, raw json.RawMessage) *jsonrpc.Message {
	if len(raw) <= maxLeaseName+2 { // a JSON string is at least its text and two quotes
		return nil
	}
	if !req.Sessionless() && req.Session.Key() != "" {
		return nil // a session's leases are the session's: the name is not used
	}
	var name string
	if json.Unmarshal(raw, &name) != nil || len(name) <= maxLeaseName {
		return nil
	}
	return failure(jsonrpc.CodeInvalidParams, "_meta[%q] is %d bytes, over the %d a lease name may have; name the conversation with a shorter id (a UUID will do)",
		LeaseMetaKey, len(name), maxLeaseName)
}

// leaseKey is the lease key of who's request of session s (nil: none),
// whose _meta[LeaseMetaKey] is lease, raw (nil: absent).
func leaseKey(who identity.Principal, s downstream.Session, lease json.RawMessage) (session.Key, bool) {
	space := leaseSpace(who)
	if s != nil {
		if id := s.Key(); id != "" {
			return session.SessionKey(space, id), false
		}
	}
	var name string
	if lease != nil && json.Unmarshal(lease, &name) == nil && name != "" {
		return session.NamedKey(space, name), false
	}
	return session.AnonymousKey(space), true
}

// HoldsLease reports whether who's conversation name, as a sessionless
// request names it under LeaseMetaKey, holds a lease of any server here
// (downstream.HTTPOptions.LeaseHere).
func (p *Proxy) HoldsLease(who identity.Principal, name string) bool {
	key := session.NamedKey(leaseSpace(who), name)
	for _, rs := range p.current().servers {
		if _, ok := rs.pool.Held(key); ok {
			return true
		}
	}
	return false
}

// principalOf is who req is made for, as far as the requests a shared
// instance sends without saying for which call go (upstream.Request.
// Principal): the authenticated client (a static token's name, an OAuth
// client); without authentication, the address its session or request came
// from where the aggregator tells clients apart by address (a non-loopback
// bind); otherwise the local user, whoever runs the aggregator (stdio, or
// a loopback bind without authentication), as for requests made outside a
// transport. The zero Principal, no one's, for a call made by no request.
func principalOf(req *downstream.Request) identity.Principal {
	switch {
	case req == nil:
		return identity.Principal{}
	case req.Principal.IsZero():
		return identity.Local()
	}
	return req.Principal
}

// holderOf is who req's new leases count against for the per-client
// share (downstream.Request.Holder); "" for a call made by no request.
func holderOf(req *downstream.Request) string {
	if req == nil {
		return ""
	}
	return req.Holder
}
