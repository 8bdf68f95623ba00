package fairshare

import (
	"context"
	"sync"
)

// Slots is a fixed number of slots that work waits for (calls in flight
// under limits.max_concurrent), shared fairly among holders (see Of):
//
//   - One holder takes at most Share slots at once; its further work waits
//     for one of its own to end, however many slots are free, so that one
//     client can never take every slot and make the others wait for its
//     slowest work.
//   - While work of several holders waits, a freed slot goes to the holder
//     that holds the fewest, so that the holders waiting converge on equal
//     parts; among work of one holder, the oldest goes first.
//   - Otherwise any free slot is taken at once: a holder under its share
//     never waits while a slot is free.
//
// The holder "" (no client named: stdio, a loopback bind without auth) has
// no share of its own. Safe for concurrent use.
type Slots struct {
	size, share int

	mu      sync.Mutex
	used    int
	held    map[string]int
	waiting []*slotWaiter // oldest first
}

type slotWaiter struct {
	holder string
	ready  chan struct{} // closed once the slot is granted
}

// NewSlots returns size slots of which one holder takes at most share (0
// or less, or share ≥ size: no share of its own). size must be positive.
func NewSlots(size, share int) *Slots {
	if share <= 0 || share >= size {
		share = 0
	}
	return &Slots{size: size, share: share, held: map[string]int{}}
}

// Size is the number of slots.
func (s *Slots) Size() int { return s.size }

// Share is the most one holder takes at once (0: no share of its own).
func (s *Slots) Share() int { return s.share }

// Acquire takes a slot for holder, waiting until one is granted or ctx
// ends. It returns nil, or, when ctx ended first, ctx's cause and whether
// the holder was at its share then (its wait was for one of its own). Every
// nil return is matched by one Release with the same holder.
func (s *Slots) Acquire(ctx context.Context, holder string) (atShare bool, err error) {
	s.mu.Lock()
	// dispatch leaves no waiting work that fits while a slot is free, so
	// work that fits now jumps no queue.
	if s.fits(holder) {
		s.grant(holder)
		s.mu.Unlock()
		return false, nil
	}
	w := &slotWaiter{holder: holder, ready: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	s.dispatch()
	s.mu.Unlock()

	select {
	case <-w.ready:
		return false, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.ready: // granted while ctx ended: give it to the next
		s.release(holder)
	default:
		for i, o := range s.waiting {
			if o == w {
				s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
				break
			}
		}
		atShare = s.share > 0 && holder != "" && s.held[holder] >= s.share
	}
	return atShare, context.Cause(ctx)
}

// Release gives back a slot Acquire took for holder.
func (s *Slots) Release(holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(holder)
}

// Held is how many slots holder holds.
func (s *Slots) Held(holder string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[holder]
}

func (s *Slots) release(holder string) {
	s.used--
	if s.held[holder]--; s.held[holder] <= 0 {
		delete(s.held, holder)
	}
	s.dispatch()
}

// fits reports whether holder may take a slot now.
func (s *Slots) fits(holder string) bool {
	return s.used < s.size && (s.share == 0 || holder == "" || s.held[holder] < s.share)
}

func (s *Slots) grant(holder string) {
	s.used++
	s.held[holder]++
}

// dispatch grants free slots to waiting work: each to the oldest work of
// the waiting holder that holds the fewest and may take one.
func (s *Slots) dispatch() {
	for s.used < s.size {
		best := -1
		for i, w := range s.waiting {
			if s.fits(w.holder) && (best < 0 || s.held[w.holder] < s.held[s.waiting[best].holder]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := s.waiting[best]
		s.waiting = append(s.waiting[:best], s.waiting[best+1:]...)
		s.grant(w.holder)
		close(w.ready)
	}
}
