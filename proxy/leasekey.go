package proxy

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// LeaseMetaKey is the _meta key a sessionless (protocol 2026-07-28) client
// sets on tools/call to name the conversation its leases belong to.
const LeaseMetaKey = "mcp-aggregator/lease"

// anonymousKey is shared by sessionless requests that name no lease.
const anonymousKey session.Key = "anonymous"

func sessionKey(id string) session.Key { return session.Key("session:" + id) }

// LeaseKey says which downstream session a call belongs to, and so which
// leased instances it may use: the stdio connection or the HTTP session;
// for sessionless requests the string under LeaseMetaKey in the request's
// _meta; otherwise one shared anonymous key. anonymous reports the last
// case so the caller can warn once.
func LeaseKey(s downstream.Session, meta map[string]json.RawMessage) (key session.Key, anonymous bool) {
	if s != nil && s.Key() != "" {
		return sessionKey(s.Key()), false
	}
	var name string
	if raw, ok := meta[LeaseMetaKey]; ok && json.Unmarshal(raw, &name) == nil && name != "" {
		return session.Key("meta:" + name), false
	}
	return anonymousKey, true
}
