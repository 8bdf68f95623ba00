package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// useLease grants key's lease for a call of owner (Claim.Owner) when its
// instance serves as it is (alive, not due for recycling) and the pool
// takes calls for key; nil otherwise, for acquireLease to find out why.
// Callers hold mu.
func (p *Pool) useLease(key Key, owner any) *Grant {
	if p.closed || p.ended[key] {
		return nil
	}
	l := p.leases[key]
	if l == nil || l.rec == nil || isDead(l.rec.inst) || p.due(l.rec) {
		return nil
	}
	return p.grantLease(l, owner)
}

// grantLease grants l's instance, which serves as it is, for a call of
// owner (nil: the lease keeps its own). Callers hold mu.
func (p *Pool) grantLease(l *lease, owner any) *Grant {
	l.lastUsed = time.Now()
	if owner != nil {
		l.owner = owner
	}
	if !l.unannounced {
		return p.useSame(l.rec)
	}
	g := p.use(l.rec)
	g.First, g.Reclaimed = true, l.reclaimed
	return g
}

// acquireLease returns key's dedicated instance, leasing one on first use:
// a spare when one is ready, else a new instance within the caps. Over a
// cap it first reclaims the lease of a session gone idle (reclaim.go), else
// waits until a lease with no call in flight has gone unused long enough to
// be reclaimed (at most ReclaimIdle), or up to lease.queue_timeout for
// room; it is refused at once only when neither may come.
func (p *Pool) acquireLease(ctx context.Context, key Key, c Claim) (*Grant, error) {
	p.mu.Lock()
	if g := p.useLease(key, c.Owner); g != nil {
		// The common case, the session's instance serving it as it is:
		// granted under one lock, with no acquire under way to record.
		p.mu.Unlock()
		return g, nil
	}
	p.acquiring[key]++
	p.mu.Unlock()
	holder := c.Holder
	if c.ForHost {
		ctx = upstream.ForHost(ctx, c.Host)
	}
	if c.Owner != nil {
		ctx = withOwner(ctx, c.Owner)
	}
	var queue *time.Timer // runs once the session first hits a cap
	var queued time.Duration
	queueOver := false // lease.queue_timeout passed
	// reclaimBy: ReclaimIdle after the session first hit lease.max_instances,
	// the last moment it waits for a lease to turn reclaimable.
	var reclaimBy time.Time
	defer func() {
		if queue != nil {
			queue.Stop()
		}
		p.mu.Lock()
		if p.acquiring[key]--; p.acquiring[key] <= 0 {
			delete(p.acquiring, key)
			delete(p.ended, key)
		}
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		if p.ended[key] {
			p.mu.Unlock()
			return nil, ErrSessionEnded
		}
		l := p.leases[key]
		var retired *record
		var why string
		switch {
		case l == nil || l.rec == nil:
		case isDead(l.rec.inst):
			// The session's instance died: its state is gone. The lease
			// keeps its slot; a fresh instance takes over and says so.
			retired, why = l.rec, "lost"
			l.rec, l.lost = nil, true
		case p.due(l.rec):
			// lease.max_calls or lease.max_age: replaced between calls. A
			// call still running on the old instance finishes there.
			retired, why = l.rec, "recycled"
			l.rec, l.recycled = nil, true
		default:
			g := p.grantLease(l, ownerOf(ctx))
			p.mu.Unlock()
			return g, nil
		}
		p.mu.Unlock()
		if retired != nil {
			p.retire(retired, false, why)
		}
		g, wait, err := p.fill(ctx, key, holder)
		switch {
		case err != nil:
			return nil, err
		case g != nil:
			return g, nil
		case wait == nil:
			continue // look again
		}
		// Over a cap. At lease.max_instances, a lease idle long enough is
		// reclaimed; else the session waits for the first lease with no
		// call in flight to turn idle long enough, if it does within
		// ReclaimIdle of the first refusal (a lease used since then is at
		// work). It also waits up to lease.queue_timeout, timed from the
		// first refusal by the queue_timeout in force then, for a slot to
		// free. It is refused when neither is left to wait for.
		var soonest time.Time
		if errors.Is(wait.err, ErrCapReached) {
			now := time.Now()
			ok, at, idleFor := p.reclaim(now)
			if ok {
				continue // an idle session's slot is free now
			}
			if reclaimBy.IsZero() {
				reclaimBy = now.Add(idleFor)
			}
			if !at.IsZero() && !at.After(now) {
				continue // calls raced the reclaim: look again
			}
			if !at.After(reclaimBy) {
				soonest = at
			}
		}
		if queue == nil && !queueOver && wait.queue > 0 {
			queued = wait.queue
			queue = time.NewTimer(queued)
		}
		if soonest.IsZero() && queue == nil {
			return nil, p.reclaimedError(key, p.capError(wait, queued, nil))
		}
		var queueC, reclaimC <-chan time.Time
		if queue != nil {
			queueC = queue.C
		}
		var reclaimTimer *time.Timer
		if !soonest.IsZero() {
			reclaimTimer = time.NewTimer(time.Until(soonest))
			reclaimC = reclaimTimer.C
		}
		var done error
		p.mu.Lock()
		p.waiting++
		p.mu.Unlock()
		select {
		case <-wait.pool: // a slot freed, or the cap was raised
		case <-wait.ledger:
		case <-reclaimC: // a lease may be reclaimable now: look again
		case <-queueC:
			// Waiting on only for a lease to turn reclaimable, if one may.
			queue, queueOver = nil, true
		case <-ctx.Done():
			done = context.Cause(ctx)
		}
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if reclaimTimer != nil {
			reclaimTimer.Stop()
		}
		if done != nil {
			return nil, p.reclaimedError(key, p.capError(wait, 0, done))
		}
	}
}

// capWait is what a session over a cap may wait on, and the settings in
// force when it was refused.
type capWait struct {
	err          error // ErrCapReached or ErrLimitReached
	pool, ledger <-chan struct{}
	max          int           // lease.max_instances
	queue        time.Duration // lease.queue_timeout
}

// capError explains a refusal: which cap, where it is set, and what frees
// room. waited is the queue time spent, if any; cause why waiting ended
// early.
func (p *Pool) capError(wait *capWait, waited time.Duration, cause error) error {
	which := wait.err
	var msg string
	if errors.Is(which, ErrLimitReached) {
		msg = fmt.Sprintf("the aggregator runs %d upstream instances across all servers (limits.max_instances: %d); raise limits.max_instances, or release leases of other servers with mcp_release",
			p.ledger.Count(), p.ledger.MaxInstances())
	} else {
		msg = fmt.Sprintf("all %d instances of server %q are leased to other sessions (lease.max_instances: %d); one frees when its session calls mcp_release, ends, or idles past lease.idle_ttl; raise lease.max_instances",
			wait.max, p.cfg.Server, wait.max)
	}
	switch {
	case cause != nil:
		return fmt.Errorf("%w: %s: %w", which, msg, cause)
	case waited > 0:
		return fmt.Errorf("%w: none freed within lease.queue_timeout (%s): %s", which, waited, msg)
	default:
		return fmt.Errorf("%w: %s, or set lease.queue_timeout to wait for one", which, msg)
	}
}

// fill gives key's lease an instance: a spare, or a new one. A new lease
// takes a slot within the caps; a lease that lost or recycled its instance
// has one already. It returns a grant, or what to wait on when over a cap,
// or neither when the caller should look again. A new lease takes a place
// of holder's share first, kept while the lease lasts.
func (p *Pool) fill(ctx context.Context, key Key, holder string) (*Grant, *capWait, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, ErrClosed
	}
	l := p.leases[key]
	if l != nil && l.rec != nil {
		p.mu.Unlock()
		return nil, nil, nil
	}
	// Concurrent calls of one session share the one instance the first of
	// them starts.
	if wait, starting := p.pending[key]; starting {
		p.mu.Unlock()
		select {
		case <-wait:
			return nil, nil, nil
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for this session's instance to start: %w", context.Cause(ctx))
		}
	}
	if l == nil {
		if err := p.perClient.Take(holder); err != nil {
			p.mu.Unlock()
			return nil, nil, err
		}
	}
	// giveShare gives the place back when no lease comes of this fill.
	giveShare := func() {
		if l == nil {
			p.perClient.Give(holder)
		}
	}
	var rec, unsuited *record
	for i := 0; i < len(p.spares) && rec == nil; {
		cand := p.spares[i]
		if isDead(cand.inst) {
			p.spares = slices.Delete(p.spares, i, i+1)
			p.mu.Unlock()
			p.retire(cand, true, "")
			p.mu.Lock()
			i = 0 // the spares may have changed meanwhile
			continue
		}
		if !upstream.Suits(ctx, cand.inst) {
			i++ // started declaring other extensions than this host's (upstream.ForHost)
			continue
		}
		p.spares = slices.Delete(p.spares, i, i+1)
		rec = cand
	}
	if rec == nil && len(p.spares) > 0 {
		// No spare suits the host: one gives its slot to the instance
		// started for it, so that the host is not kept waiting on a cap
		// by spares it cannot use.
		unsuited = p.spares[0]
		p.spares = p.spares[1:]
	}
	if (rec != nil || unsuited != nil) && l != nil {
		p.freeSlot() // the spare brings its own slot; the lease's is not needed
	}
	if unsuited != nil {
		p.mu.Unlock()
		p.retire(unsuited, false, "") // its slot is the new instance's (or was freed above)
		p.mu.Lock()
	}
	if rec == nil && l == nil && unsuited == nil {
		if err := p.takeSlot(); err != nil {
			wait := &capWait{err: err, pool: p.freed, ledger: p.ledger.waitFreed(), max: p.cfg.MaxInstances, queue: p.cfg.QueueTimeout}
			giveShare()
			p.mu.Unlock()
			return nil, wait, nil
		}
	}
	mine := make(chan struct{})
	p.pending[key] = mine
	// Close waits for this start, so that the slot it holds is given back
	// once, by whichever of the two comes last. Added under mu, so that it
	// is ordered before Close's Wait.
	p.wg.Add(1)
	defer func() {
		p.mu.Lock()
		delete(p.pending, key)
		p.mu.Unlock()
		close(mine)
		p.wg.Done()
	}()
	if rec == nil {
		p.mu.Unlock()
		sctx, cancel := p.startCtx(ctx)
		inst, err := p.factory(sctx)
		cancel()
		p.mu.Lock()
		if err != nil {
			if l == nil {
				p.freeSlot()
			}
			giveShare()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return nil, nil, ErrClosed
			}
			return nil, nil, err
		}
		rec = newRecord(inst, RoleLeased)
	}
	if p.closed || p.ended[key] || (l != nil && p.leases[key] != l) {
		// The pool closed, the session ended, or the lease ended
		// (mcp_release) while its new instance started: the instance has
		// no slot to run in.
		closed, ended := p.closed, p.ended[key]
		if l == nil {
			p.freeSlot()
		}
		giveShare()
		p.mu.Unlock()
		_ = rec.inst.Close()
		switch {
		case closed:
			return nil, nil, ErrClosed
		case ended:
			return nil, nil, ErrSessionEnded
		}
		return nil, nil, nil
	}
	first := l == nil
	if first {
		l = &lease{holder: holder}
		p.leases[key] = l
	} else {
		l.restarts++
	}
	if o := ownerOf(ctx); o != nil {
		l.owner = o
	}
	rec.role, rec.key, rec.restarts, rec.lease = RoleLeased, key, l.restarts, l
	l.rec, l.lastUsed = rec, time.Now()
	g := p.use(rec)
	l.unannounced = l.unannounced || first || l.lost
	g.First, g.Lost, g.Recycled = l.unannounced, l.lost, l.recycled
	if first {
		l.reclaimed = p.takeReclaimed(key)
	}
	g.Reclaimed = l.unannounced && l.reclaimed
	l.lost, l.recycled = false, false
	p.mu.Unlock()
	p.emit(Event{Kind: "leased", Server: p.cfg.Server, Key: key, PID: rec.inst.PID()})
	if g.Lost {
		// A restart like a shared instance's, only started by the
		// session's next call rather than by a supervisor. (A recycled
		// instance counted as one when it was retired.)
		p.emit(Event{Kind: "restarted", Server: p.cfg.Server, Key: key, PID: rec.inst.PID()})
	}
	p.refill()
	return g, nil, nil
}

// Release ends key's lease, if any, and stops its instance once its calls
// finish. It reports whether there was a lease.
func (p *Pool) Release(key Key) bool {
	return p.end(key, "released")
}

// end ends key's lease. Its instance keeps its slot until it is closed, so
// the caps count every process that still runs.
func (p *Pool) end(key Key, why string) bool { return p.endIf(key, why, nil) }

// endIf is end, if the lease still meets cond (nil: any lease)
// when it is looked at under the lock.
func (p *Pool) endIf(key Key, why string, cond func(*lease) bool) bool {
	p.mu.Lock()
	if why == "session-ended" {
		if p.acquiring[key] > 0 {
			// Calls of the session wait for its instance: they get none.
			p.ended[key] = true
		}
		delete(p.reclaimed, key) // nobody is left to tell
	}
	l := p.leases[key]
	if l == nil || (cond != nil && !cond(l)) {
		p.mu.Unlock()
		return false
	}
	delete(p.leases, key)
	p.perClient.Give(l.holder)
	if l.rec == nil {
		p.freeSlot()
		p.mu.Unlock()
		p.emit(Event{Kind: why, Server: p.cfg.Server, Key: key})
		p.refill()
		return true
	}
	l.rec.lease = nil
	p.mu.Unlock()
	p.retire(l.rec, true, why)
	return true
}

// Held reports whether key holds a lease, and its instance's pid (0 while
// a recycled instance's successor has not started).
func (p *Pool) Held(key Key) (pid int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.leases[key]
	if l == nil {
		return 0, false
	}
	if l.rec != nil {
		pid = l.rec.inst.PID()
	}
	return pid, true
}

// refill starts spares until prewarm are ready or starting, within the caps.
func (p *Pool) refill() {
	if p.cfg.Stateless {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.spares)+p.starting < p.cfg.Prewarm && p.takeSlot() == nil {
		p.starting++
		p.wg.Add(1)
		go p.startSpare()
	}
}

func (p *Pool) startSpare() {
	defer p.wg.Done()
	inst, err := p.factory(p.life)
	p.mu.Lock()
	p.starting--
	// A spare no longer wanted (lease.prewarm or lease.max_instances was
	// lowered while it started) is not kept.
	unwanted := err == nil && (len(p.spares) >= p.cfg.Prewarm || p.overCap())
	if err != nil || p.closed || unwanted {
		closed := p.closed
		p.freeSlot()
		p.mu.Unlock()
		switch {
		case err == nil:
			_ = inst.Close()
		case !closed:
			p.emit(Event{Kind: "spawn-failed", Server: p.cfg.Server, Err: err})
		}
		return
	}
	p.spares = append(p.spares, newRecord(inst, RoleSpare))
	p.signalFreed() // a caller waiting under the cap can take it
	p.mu.Unlock()
}

// expireLoop ends leases idle past lease.idle_ttl, and recycles idle
// leased instances and spares older than lease.max_age, looking as often as
// the settings in force ask: Adjust wakes it to look at new ones.
func (p *Pool) expireLoop() {
	for {
		p.mu.Lock()
		ttl, age, tuned := p.cfg.IdleTTL, p.cfg.MaxAge, p.tuned
		p.looks++
		p.mu.Unlock()
		if !p.expireEvery(ttl, age, tuned) {
			return
		}
	}
}

// expireEvery runs expire a few times per idle_ttl or max_age (never when
// both are 0) until the settings change (true) or the pool closes (false).
func (p *Pool) expireEvery(ttl, age time.Duration, tuned <-chan struct{}) bool {
	var tick <-chan time.Time
	if ttl > 0 || age > 0 {
		t := time.NewTicker(max(min(nonZero(ttl), nonZero(age))/4, 10*time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-p.stopTTL:
			return false
		case <-tuned:
			return true
		case now := <-tick:
			p.expire(now)
		}
	}
}

func nonZero(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Duration(1<<63 - 1)
	}
	return d
}

func (p *Pool) expire(now time.Time) {
	var idle []Key
	var recycled, stale []*record
	p.mu.Lock()
	for k, l := range p.leases {
		switch {
		case l.rec != nil && l.rec.inflight > 0:
		case p.cfg.IdleTTL > 0 && now.Sub(l.lastUsed) >= p.cfg.IdleTTL:
			idle = append(idle, k)
		case l.rec != nil && p.due(l.rec):
			recycled = append(recycled, l.rec)
			l.rec, l.recycled = nil, true
		}
	}
	p.forgetReclaimed(now)
	if p.cfg.MaxAge > 0 {
		kept := p.spares[:0]
		for _, s := range p.spares {
			if now.Sub(s.started) >= p.cfg.MaxAge {
				stale = append(stale, s)
			} else {
				kept = append(kept, s)
			}
		}
		p.spares = kept
	}
	p.mu.Unlock()
	if p.afterIdleScan != nil {
		p.afterIdleScan()
	}
	// A call may take a lease between the look above and its end: it is
	// ended only if it is still idle then.
	stillIdle := func(l *lease) bool {
		return (l.rec == nil || l.rec.inflight == 0) && now.Sub(l.lastUsed) >= p.cfg.IdleTTL
	}
	for _, k := range idle {
		p.endIf(k, "expired", stillIdle)
	}
	for _, r := range recycled {
		p.retire(r, false, "recycled")
	}
	for _, s := range stale {
		p.retire(s, true, "recycled")
	}
}

// Revoke ends the leases that revoked accepts, given each one's key and
// the owner its last call named (Claim.Owner; nil if none did) (event
// "revoked"), and stops their instances once their calls finish; it
// reports how many it ended.
func (p *Pool) Revoke(revoked func(key Key, owner any) bool) int {
	p.mu.Lock()
	var keys []Key
	for k, l := range p.leases {
		if revoked(k, l.owner) {
			keys = append(keys, k)
		}
	}
	p.mu.Unlock()
	n := 0
	for _, k := range keys {
		if p.end(k, "revoked") {
			n++
		}
	}
	return n
}

// EndSession ends key's lease because the downstream session ended.
func (p *Pool) EndSession(key Key) { p.end(key, "session-ended") }
