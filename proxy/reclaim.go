package proxy

import (
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// attached reports whether the client of the downstream session that key
// leases for is there now (session.Config.Connected): a session with a
// request in flight or a stream open, or one whose transport cannot tell
// (stdio, there until its end). A sessionless key has no connection
// beyond its requests, and a session that ended none at all.
func (p *Proxy) attached(key session.Key) bool {
	s := p.clients.byLeaseKey(key)
	if s == nil {
		return false
	}
	if a, ok := s.ds.(downstream.Attached); ok {
		return a.Attached()
	}
	return true
}
