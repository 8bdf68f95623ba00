package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// acquireShared hands out the one instance every session of a stateless
// server shares, or says why it is down.
func (p *Pool) acquireShared(ctx context.Context) (*Grant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if p.shared == nil || isDead(p.shared) {
		if p.down == nil || p.restartAt.IsZero() {
			return nil, fmt.Errorf("server %q is down; it is being restarted", p.cfg.Server)
		}
		wait := max(time.Until(p.restartAt), 0).Round(time.Millisecond)
		return nil, fmt.Errorf("server %q is down (%v); restarting in %s", p.cfg.Server, p.down, wait)
	}
	p.inflight++
	return &Grant{Instance: p.shared, done: p.callDone}, nil
}

// watchShared supervises the shared instance: when it dies or stops
// answering pings it is replaced, with capped exponential backoff between
// failed starts. Calls made while it is down fail at once with the reason.
func (p *Pool) watchShared(inst *upstream.Instance) {
	defer p.wg.Done()
	backoff := minBackoff
	for {
		reason := p.supervise(inst)
		p.mu.Lock()
		closing := p.closed
		p.mu.Unlock()
		if reason == nil || closing {
			return
		}
		// Down first, so no call reaches the lost instance and status stops
		// calling it healthy; then close it without holding up the restart
		// (a hung process takes the whole shutdown sequence).
		p.mu.Lock()
		if p.shared == inst {
			p.shared, p.down, p.restartAt = nil, reason, time.Now().Add(backoff)
		}
		p.mu.Unlock()
		p.emit(Event{Kind: "lost", Server: p.cfg.Server, PID: inst.PID(), Err: reason})
		p.wg.Add(1)
		go func(lost *upstream.Instance) { defer p.wg.Done(); _ = lost.Close() }(inst)
		for {
			p.mu.Lock()
			p.shared, p.down, p.restartAt = nil, reason, time.Now().Add(backoff)
			p.mu.Unlock()
			select {
			case <-p.stopTTL:
				return
			case <-time.After(backoff):
			}
			fresh, err := p.factory(context.Background())
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				if fresh != nil {
					_ = fresh.Close()
				}
				return
			}
			if err == nil {
				p.shared, p.down = fresh, nil
				p.mu.Unlock()
				p.emit(Event{Kind: "restarted", Server: p.cfg.Server, PID: fresh.PID()})
				inst, backoff = fresh, minBackoff
				break
			}
			p.mu.Unlock()
			reason = err
			p.emit(Event{Kind: "spawn-failed", Server: p.cfg.Server, Err: err})
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// supervise waits until inst dies or fails two pings in a row (returning
// why), or the pool closes (returning nil).
func (p *Pool) supervise(inst *upstream.Instance) error {
	var tick <-chan time.Time
	if p.cfg.PingInterval > 0 {
		t := time.NewTicker(p.cfg.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	failures := 0
	for {
		select {
		case <-p.stopTTL:
			return nil
		case <-inst.Done():
			if err := inst.Err(); err != nil {
				return err
			}
			return errors.New("the connection closed")
		case <-tick:
			ctx, cancel := context.WithTimeout(context.Background(), p.cfg.PingInterval)
			err := inst.Ping(ctx)
			cancel()
			if err == nil {
				failures = 0
				continue
			}
			if failures++; failures >= 2 {
				return fmt.Errorf("no answer to two pings in a row: %w", err)
			}
		}
	}
}
