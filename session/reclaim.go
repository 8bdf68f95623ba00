package session

import (
	"fmt"
	"slices"
	"time"
)

// DefaultReclaimIdle is how long a lease must have gone unused before a
// session over lease.max_instances may take its place: a session that
// called this recently is at work, and is never reclaimed.
const DefaultReclaimIdle = 10 * time.Second

// reclaimCandidate is a lease that could be reclaimed, as seen under mu.
type reclaimCandidate struct {
	key       Key
	lease     *lease
	lastUsed  time.Time
	connected bool
}

// reclaim makes room under lease.max_instances for a new lease by ending
// the lease that has been idle longest: no call in flight and none waiting
// for its instance, unused for at least Config.ReclaimIdle. A session that
// has no open connection or stream (Config.Connected) counts as more idle
// than one that has, whatever its last call. The reclaimed instance hands
// its slot on at once, as a recycled one does, and drains; its session is
// told on its next call of the server (Grant.Reclaimed). reclaim reports
// whether it ended a lease. When it did not, soonest is when the lease to
// wait for turns reclaimable, if no call starts on it before: of the leases
// with no call now, the first to go unused long enough among those whose
// session has no connection, else among the others (zero: every lease has
// a call in flight or waiting). idleFor is the Config.ReclaimIdle in force.
func (p *Pool) reclaim(now time.Time) (ok bool, soonest time.Time, idleFor time.Duration) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false, time.Time{}, 0
	}
	idleFor = p.cfg.ReclaimIdle
	var quiet []reclaimCandidate
	for k, l := range p.leases {
		if p.quietLease(k, l) {
			quiet = append(quiet, reclaimCandidate{key: k, lease: l, lastUsed: l.lastUsed})
		}
	}
	p.mu.Unlock()
	if len(quiet) == 0 {
		return false, time.Time{}, idleFor
	}
	// Asked outside mu: the answer comes from the transports' own locks.
	if p.cfg.Connected != nil {
		for i := range quiet {
			quiet[i].connected = p.cfg.Connected(quiet[i].key)
		}
	}
	slices.SortFunc(quiet, func(a, b reclaimCandidate) int {
		if a.connected != b.connected {
			if a.connected {
				return 1
			}
			return -1
		}
		return a.lastUsed.Compare(b.lastUsed)
	})
	raced, awaitGone := false, false
	for _, c := range quiet {
		if c.connected && awaitGone {
			// A session without a connection turns reclaimable soon: it
			// goes first, whatever the connected ones' last calls.
			break
		}
		if at := c.lastUsed.Add(idleFor); now.Before(at) {
			if soonest.IsZero() {
				soonest = at // the first of its kind, by the order above
			}
			awaitGone = awaitGone || !c.connected
			continue
		}
		if p.reclaimLease(c, now, idleFor) {
			return true, time.Time{}, idleFor
		}
		raced = true
	}
	if raced && soonest.IsZero() {
		// A call started on each lease reclaimable a moment ago: the
		// caller looks again at once.
		return false, now, idleFor
	}
	return false, soonest, idleFor
}

// idleLease reports whether key's lease l may be reclaimed now. Callers
// hold mu.
func (p *Pool) idleLease(key Key, l *lease, now time.Time, idleFor time.Duration) bool {
	return now.Sub(l.lastUsed) >= idleFor && p.quietLease(key, l)
}

// quietLease reports whether key's lease l has no call in flight, none
// waiting for its instance and no instance starting: it turns reclaimable
// once it has gone unused long enough. Callers hold mu.
func (p *Pool) quietLease(key Key, l *lease) bool {
	if p.acquiring[key] > 0 {
		return false
	}
	if _, starting := p.pending[key]; starting {
		return false
	}
	return l.rec == nil || l.rec.inflight == 0
}

// reclaimLease ends c's lease if it is still the one seen and still idle,
// and frees its slot at once.
func (p *Pool) reclaimLease(c reclaimCandidate, now time.Time, idleFor time.Duration) bool {
	p.mu.Lock()
	if p.closed || p.leases[c.key] != c.lease || !p.idleLease(c.key, c.lease, now, idleFor) {
		p.mu.Unlock()
		return false
	}
	l := c.lease
	delete(p.leases, c.key)
	p.perClient.Give(l.holder)
	if l.rec != nil {
		l.rec.lease = nil
	}
	p.reclaimed[c.key] = now
	p.freeSlot()
	rec := l.rec
	p.mu.Unlock()
	if rec != nil {
		p.retire(rec, false, "reclaimed")
	} else {
		p.emit(Event{Kind: "reclaimed", Server: p.cfg.Server, Key: c.key})
	}
	return true
}

// takeReclaimed reports whether key's lease was reclaimed since its last
// call, and forgets it: the session is told once. Callers hold mu.
func (p *Pool) takeReclaimed(key Key) bool {
	if _, ok := p.reclaimed[key]; !ok {
		return false
	}
	delete(p.reclaimed, key)
	return true
}

// forgetReclaimed drops the marks of reclaimed leases whose sessions did
// not call again within lease.idle_ttl: their leases would have expired by
// then anyway. Callers hold mu.
func (p *Pool) forgetReclaimed(now time.Time) {
	if p.cfg.IdleTTL <= 0 {
		return
	}
	for k, at := range p.reclaimed {
		if now.Sub(at) >= p.cfg.IdleTTL {
			delete(p.reclaimed, k)
		}
	}
}

// reclaimedError adds to a refusal of key that its previous instance was
// reclaimed, if it was, and forgets it.
func (p *Pool) reclaimedError(key Key, err error) error {
	p.mu.Lock()
	told := p.takeReclaimed(key)
	p.mu.Unlock()
	if !told {
		return err
	}
	return fmt.Errorf("%w (this session's previous instance of server %q was reclaimed for another session after it went unused, and its state is lost)", err, p.cfg.Server)
}
