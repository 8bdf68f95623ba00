package proxy

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// LeaseMetaKey is the _meta key a sessionless (protocol 2026-07-28) client
// sets on tools/call to name the conversation its leases belong to.
const LeaseMetaKey = "mcp-aggregator/lease"

// anonymousKey is shared by sessionless requests that name no lease.
const anonymousKey session.Key = "anonymous"

func sessionKey(id string) session.Key { return session.Key("session:" + id) }

// LeaseKey says which downstream session a call belongs to, and so which
// leased instances it may use: the stdio connection or the HTTP session
// (Mcp-Session-Id); for sessionless requests the string under LeaseMetaKey
// in the request's _meta; otherwise one shared anonymous key. anonymous
// reports the last case so the caller can warn once.
func LeaseKey(ctx context.Context, meta *mcp.Meta) (key session.Key, anonymous bool) {
	if s := server.ClientSessionFromContext(ctx); s != nil && s.SessionID() != "" {
		return sessionKey(s.SessionID()), false
	}
	if meta != nil {
		if v, ok := meta.AdditionalFields[LeaseMetaKey].(string); ok && v != "" {
			return session.Key("meta:" + v), false
		}
	}
	return anonymousKey, true
}
