package proxy

import (
	"fmt"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// poolConfig is the pool a server's config asks for, without the ledger
// and event hook the proxy adds.
func poolConfig(s *config.Server) session.Config {
	return session.Config{
		Server: s.ID, Stateless: s.Stateless,
		IdleTTL: s.Lease.IdleTTL, MaxInstances: s.Lease.MaxInstances, Prewarm: s.Lease.Prewarm,
		QueueTimeout: s.Lease.QueueTimeout, MaxAge: s.Lease.MaxAge, MaxCalls: s.Lease.MaxCalls,
		PingInterval: s.PingInterval,
	}
}

// poolChanges lists, as "field old -> new", the settings that govern only
// a server's pool (session.Pool.Adjust) and differ between a and b. The
// lease settings of a shared server change nothing, so they are not listed.
// TestPoolChangesCoverEveryField fails when a field of config.Lease is left
// out here.
func poolChanges(a, b *config.Server) []string {
	var out []string
	add := func(field string, was, is any) {
		if was != is {
			out = append(out, fmt.Sprintf("%s %v -> %v", field, was, is))
		}
	}
	if !b.Stateless {
		x, y := a.Lease, b.Lease
		add("lease.idle_ttl", x.IdleTTL, y.IdleTTL)
		add("lease.max_instances", x.MaxInstances, y.MaxInstances)
		add("lease.prewarm", x.Prewarm, y.Prewarm)
		add("lease.queue_timeout", x.QueueTimeout, y.QueueTimeout)
		add("lease.max_age", x.MaxAge, y.MaxAge)
		add("lease.max_calls", x.MaxCalls, y.MaxCalls)
	}
	add("ping_interval", a.PingInterval, b.PingInterval)
	return out
}
