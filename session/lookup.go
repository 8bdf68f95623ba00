package session

import "github.com/mcp-aggregator/mcp-aggregator/upstream"

// Holder reports which session holds inst as its lease.
func (p *Pool) Holder(inst *upstream.Instance) (Key, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, l := range p.leases {
		if l.rec != nil && l.rec.inst == inst {
			return k, true
		}
	}
	return Key{}, false
}

// Leased returns the instance key holds, if any.
func (p *Pool) Leased(key Key) (*upstream.Instance, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.leases[key]; l != nil && l.rec != nil {
		return l.rec.inst, true
	}
	return nil, false
}
