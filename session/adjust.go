package session

import "slices"

// Adjust gives the running pool the settings of cfg that only govern how it
// hands out and keeps its instances (lease.idle_ttl, lease.max_instances,
// lease.prewarm, lease.queue_timeout, lease.max_age, lease.max_calls and
// ping_interval); the other fields of cfg are ignored, since they are fixed
// for the pool's life. No instance that serves a session is touched:
//
//   - a raised max_instances lets sessions waiting in the queue, and the
//     next ones, lease at once; a lowered one refuses new leases over it
//     and stops spares above it, while every leased instance runs on until
//     its lease ends;
//   - idle_ttl, max_age and max_calls count from each lease's last use,
//     start and first call as before, against the new values from now on;
//   - a raised prewarm starts spares, a lowered one stops the spares over it.
func (p *Pool) Adjust(cfg Config) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	lowered := cfg.Prewarm < p.cfg.Prewarm
	p.cfg.IdleTTL, p.cfg.MaxInstances, p.cfg.Prewarm = cfg.IdleTTL, cfg.MaxInstances, cfg.Prewarm
	p.cfg.QueueTimeout, p.cfg.MaxAge, p.cfg.MaxCalls = cfg.QueueTimeout, cfg.MaxAge, cfg.MaxCalls
	p.cfg.PingInterval = cfg.PingInterval
	p.cfg.MaxLeasesPerClient = cfg.MaxLeasesPerClient
	p.perClient.SetMax(cfg.MaxLeasesPerClient)
	var surplus []*record
	if !p.cfg.Stateless {
		n := 0
		if lowered {
			n = len(p.spares) - p.cfg.Prewarm
		}
		if p.cfg.MaxInstances > 0 {
			n = max(n, p.live-p.cfg.MaxInstances)
		}
		n = min(max(n, 0), len(p.spares))
		keep := len(p.spares) - n
		surplus = slices.Clone(p.spares[keep:])
		p.spares = slices.Clip(p.spares[:keep])
	}
	close(p.tuned) // the expiry and ping loops look at the new settings
	p.tuned = make(chan struct{})
	p.signalFreed() // sessions queued under a raised cap try again
	p.mu.Unlock()
	for _, rec := range surplus {
		p.retire(rec, true, "spare-stopped")
	}
	p.refill()
}
