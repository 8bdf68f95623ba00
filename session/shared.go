package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// acquireShared hands out the one instance every session of a stateless
// server shares, or says why it is down.
func (p *Pool) acquireShared(context.Context) (*Grant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if p.shared == nil || isDead(p.shared.inst) {
		if p.down == nil || p.restartAt.IsZero() {
			return nil, fmt.Errorf("server %q is down; it is being restarted", p.cfg.Server)
		}
		wait := max(time.Until(p.restartAt), 0).Round(time.Millisecond)
		return nil, fmt.Errorf("server %q is down (%v); restarting in %s", p.cfg.Server, p.down, wait)
	}
	return p.useSame(p.shared), nil
}

// rssGrace is how many usage intervals a shared instance runs before its
// memory is held against limits.max_rss.
const rssGrace = 6

// overRSS is why a healthy shared instance is replaced.
type overRSS struct{ rss, limit int64 }

func (e *overRSS) Error() string {
	return fmt.Sprintf("its processes use %.1f MiB, over limits.max_rss (%.1f MiB)", float64(e.rss)/(1<<20), float64(e.limit)/(1<<20))
}

// watchShared supervises the shared instance. When it dies or stops
// answering pings it is replaced, with capped exponential backoff between
// failed starts and after instances that failed within stableUptime; calls made while it is down fail at once with the reason.
// When it grows past limits.max_rss, a fresh instance is started first and
// takes over between calls, while the old one finishes its calls.
func (p *Pool) watchShared(rec *record) {
	defer p.wg.Done()
	backoff := minBackoff
	for {
		reason := p.supervise(rec)
		p.mu.Lock()
		closing := p.closed
		p.mu.Unlock()
		if reason == nil || closing {
			return
		}
		var big *overRSS
		if errors.As(reason, &big) {
			if fresh := p.replaceShared(rec, reason); fresh != nil {
				rec = fresh
			}
			continue
		}
		// An instance that served a while before it failed starts the
		// backoff afresh; one that failed soon after it started counts as
		// a failed start, so a server that crashes right after every start
		// is restarted ever more slowly instead of four times a second.
		if time.Since(rec.started) >= stableUptime {
			backoff = minBackoff
		} else if rec.restarts > 0 {
			backoff = min(backoff*2, maxBackoff)
		}
		// Down first, so no call reaches the lost instance and status stops
		// calling it healthy; then close it without holding up the restart
		// (a hung process takes the whole shutdown sequence).
		p.mu.Lock()
		if p.shared == rec {
			p.shared, p.down, p.restartAt = nil, reason, time.Now().Add(backoff)
		}
		p.mu.Unlock()
		p.emit(Event{Kind: "lost", Server: p.cfg.Server, PID: rec.inst.PID(), Err: reason})
		p.retire(rec, false, "")
		restarts := rec.restarts
		for {
			p.mu.Lock()
			p.shared, p.down, p.restartAt = nil, reason, time.Now().Add(backoff)
			p.mu.Unlock()
			select {
			case <-p.stopTTL:
				return
			case <-time.After(backoff):
			}
			fresh, err := p.factory(p.life)
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				if fresh != nil {
					_ = fresh.Close()
				}
				return
			}
			if err == nil {
				rec = newRecord(fresh, RoleShared)
				rec.restarts = restarts + 1
				p.shared, p.down = rec, nil
				p.mu.Unlock()
				p.emit(Event{Kind: "restarted", Server: p.cfg.Server, PID: fresh.PID()})
				break
			}
			p.mu.Unlock()
			reason = err
			p.emit(Event{Kind: "spawn-failed", Server: p.cfg.Server, Err: err})
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// replaceShared starts a successor to a shared instance that is healthy
// but too big, and swaps it in; new calls go to the successor, and the old
// instance closes once its calls finish. If the successor cannot start, the
// old instance serves on and is measured again later.
func (p *Pool) replaceShared(old *record, reason error) *record {
	fresh, err := p.factory(p.life)
	if err != nil {
		p.emit(Event{Kind: "spawn-failed", Server: p.cfg.Server, Err: err})
		return nil
	}
	p.mu.Lock()
	if p.closed || p.shared != old {
		p.mu.Unlock()
		_ = fresh.Close()
		return nil
	}
	rec := newRecord(fresh, RoleShared)
	rec.restarts = old.restarts + 1
	p.shared = rec
	p.mu.Unlock()
	p.emit(Event{Kind: "replaced", Server: p.cfg.Server, PID: old.inst.PID(), Err: reason})
	p.retire(old, false, "")
	return rec
}

// supervise waits until the instance dies, fails two pings in a row, or
// outgrows limits.max_rss (returning why), or the pool closes (returning
// nil).
func (p *Pool) supervise(rec *record) error {
	inst := rec.inst
	var (
		tick     <-chan time.Time
		ping     *time.Ticker
		interval time.Duration
		tuned    <-chan struct{}
	)
	// retime follows ping_interval as Adjust sets it.
	retime := func() {
		p.mu.Lock()
		next := p.cfg.PingInterval
		tuned = p.tuned
		p.looks++
		p.mu.Unlock()
		if next == interval {
			return
		}
		interval = next
		if ping != nil {
			ping.Stop()
			ping, tick = nil, nil
		}
		if interval > 0 {
			ping = time.NewTicker(interval)
			tick = ping.C
		}
	}
	retime()
	defer func() {
		if ping != nil {
			ping.Stop()
		}
	}()
	usage := time.NewTicker(p.cfg.UsageInterval)
	defer usage.Stop()
	failures := 0
	for {
		select {
		case <-p.stopTTL:
			return nil
		case <-tuned:
			retime()
		case <-inst.Done():
			if err := inst.Err(); err != nil {
				return err
			}
			return errors.New("the connection closed")
		case <-usage.C:
			// A young instance is left alone: a limit below what a fresh
			// instance needs would otherwise replace it over and over.
			if limit := p.ledger.maxRSSBytes(); limit > 0 && time.Since(rec.started) >= rssGrace*p.cfg.UsageInterval {
				if rss := inst.Usage().RSS; rss > limit {
					return &overRSS{rss: rss, limit: limit}
				}
			}
		case <-tick:
			ctx, cancel := context.WithTimeout(context.Background(), interval)
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
