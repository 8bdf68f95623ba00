package session

import (
	"context"
	"fmt"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// acquireLease returns key's dedicated instance, leasing one on first use:
// a spare when one is ready, else a new instance within the cap.
func (p *Pool) acquireLease(ctx context.Context, key Key) (*Grant, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		l := p.leases[key]
		if l != nil && isDead(l.inst) {
			// The session's instance died: its state is gone. Hand out a
			// fresh one and say so in the result.
			lostEvent := Event{Kind: "lost", Server: p.cfg.Server, Key: key, PID: l.inst.PID(), Err: l.inst.Err()}
			delete(p.leases, key)
			p.live--
			p.signalFreed()
			p.mu.Unlock()
			p.emit(lostEvent)
			g, err := p.newLease(ctx, key, true)
			if err != nil || g != nil {
				return g, err
			}
			continue
		}
		if l != nil {
			l.inflight++
			l.lastUsed = time.Now()
			p.inflight++
			p.mu.Unlock()
			return &Grant{Instance: l.inst, done: p.leaseDone(key, l)}, nil
		}
		p.mu.Unlock()
		g, err := p.newLease(ctx, key, false)
		if err != nil || g != nil {
			return g, err
		}
	}
}

// newLease gives key a spare or a new instance, waiting for capacity under
// the cap. A nil Grant with nil error means "look again".
func (p *Pool) newLease(ctx context.Context, key Key, lost bool) (*Grant, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.leases[key] != nil {
		p.mu.Unlock()
		return nil, nil
	}
	// Concurrent first calls of one session share the one instance the
	// first of them starts.
	if wait, starting := p.pending[key]; starting {
		p.mu.Unlock()
		select {
		case <-wait:
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("server %q: waiting for this session's instance to start: %w", p.cfg.Server, context.Cause(ctx))
		}
	}
	mine := make(chan struct{})
	p.pending[key] = mine
	defer func() {
		p.mu.Lock()
		delete(p.pending, key)
		p.mu.Unlock()
		close(mine)
	}()
	var inst *upstream.Instance
	for len(p.spares) > 0 && inst == nil {
		inst = p.spares[0]
		p.spares = p.spares[1:]
		if isDead(inst) {
			inst = nil
			p.live--
		}
	}
	if inst == nil {
		if p.cfg.MaxInstances > 0 && p.live >= p.cfg.MaxInstances {
			freed := p.freed
			p.mu.Unlock()
			select {
			case <-freed:
				return nil, nil
			case <-ctx.Done():
				return nil, fmt.Errorf("server %q: %w (%d instances, all leased to other sessions); raise lease.max_instances or ask agents to call mcp_release: %w",
					p.cfg.Server, ErrCapReached, p.cfg.MaxInstances, context.Cause(ctx))
			}
		}
		p.live++
		p.mu.Unlock()
		fresh, err := p.factory(ctx)
		p.mu.Lock()
		if err != nil {
			p.live--
			p.signalFreed()
			p.mu.Unlock()
			return nil, err
		}
		inst = fresh
		if p.closed {
			p.live--
			p.mu.Unlock()
			_ = inst.Close()
			return nil, ErrClosed
		}
	}
	l := &lease{inst: inst, inflight: 1, lastUsed: time.Now(), lost: lost}
	p.leases[key] = l
	p.inflight++
	p.mu.Unlock()
	p.emit(Event{Kind: "leased", Server: p.cfg.Server, Key: key, PID: inst.PID()})
	p.refill()
	return &Grant{Instance: inst, First: true, Lost: lost, done: p.leaseDone(key, l)}, nil
}

func (p *Pool) leaseDone(key Key, l *lease) func() {
	return func() {
		p.mu.Lock()
		l.inflight--
		l.lastUsed = time.Now()
		if l.inflight == 0 && l.idle != nil {
			close(l.idle)
			l.idle = nil
		}
		p.mu.Unlock()
		p.callDone()
	}
}

// Release ends key's lease, if any, and stops its instance once its calls
// finish. It reports whether there was a lease.
func (p *Pool) Release(key Key) bool {
	return p.end(key, "released")
}

func (p *Pool) end(key Key, why string) bool {
	p.mu.Lock()
	l := p.leases[key]
	if l == nil {
		p.mu.Unlock()
		return false
	}
	delete(p.leases, key)
	var idle chan struct{}
	if l.inflight > 0 {
		idle = make(chan struct{})
		l.idle = idle
	}
	// Added under mu, so that it is ordered before Close's Wait.
	p.wg.Add(1)
	p.mu.Unlock()
	p.emit(Event{Kind: why, Server: p.cfg.Server, Key: key, PID: l.inst.PID()})
	go func() {
		defer p.wg.Done()
		if idle != nil {
			// The session's calls still running finish first.
			select {
			case <-idle:
			case <-time.After(drainLimit):
			}
		}
		_ = l.inst.Close()
		p.mu.Lock()
		p.live--
		p.signalFreed()
		p.mu.Unlock()
		p.refill()
	}()
	return true
}

// Held reports whether key holds a lease, and its instance's pid.
func (p *Pool) Held(key Key) (pid int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.leases[key]; l != nil {
		return l.inst.PID(), true
	}
	return 0, false
}

// refill starts spares until prewarm are ready or starting, within the cap.
func (p *Pool) refill() {
	if p.cfg.Stateless {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.spares)+p.starting < p.cfg.Prewarm &&
		(p.cfg.MaxInstances == 0 || p.live < p.cfg.MaxInstances) {
		p.live++
		p.starting++
		p.wg.Add(1)
		go p.startSpare()
	}
}

func (p *Pool) startSpare() {
	defer p.wg.Done()
	inst, err := p.factory(context.Background())
	p.mu.Lock()
	p.starting--
	if err != nil || p.closed {
		p.live--
		p.signalFreed()
		p.mu.Unlock()
		if err != nil {
			p.emit(Event{Kind: "spawn-failed", Server: p.cfg.Server, Err: err})
		} else {
			_ = inst.Close()
		}
		return
	}
	p.spares = append(p.spares, inst)
	p.signalFreed() // a caller waiting under the cap can take it
	p.mu.Unlock()
}

func (p *Pool) expireLoop() {
	period := p.cfg.IdleTTL / 4
	if period < 10*time.Millisecond {
		period = 10 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-p.stopTTL:
			return
		case now := <-t.C:
			var idle []Key
			p.mu.Lock()
			for k, l := range p.leases {
				if l.inflight == 0 && now.Sub(l.lastUsed) >= p.cfg.IdleTTL {
					idle = append(idle, k)
				}
			}
			p.mu.Unlock()
			for _, k := range idle {
				p.end(k, "expired")
			}
		}
	}
}

// EndSession ends key's lease because the downstream session ended.
func (p *Pool) EndSession(key Key) { p.end(key, "session-ended") }
