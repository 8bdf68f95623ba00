package upstream

// maxAbandoned is how many given-up request ids a stdio connection
// remembers, per connection.
const maxAbandoned = 256

// abandonedIDs remembers the ids of the most recent requests the
// aggregator gave up on (their caller's deadline passed, or it cancelled),
// so that an answer the upstream still sends for one is told apart from an
// answer to an id that was never sent. The oldest is forgotten first. Not
// safe for concurrent use: stdioConn guards it with its mu.
type abandonedIDs struct {
	ring []int64 // the ids in the order added, a circular buffer; 0 is none
	next int     // where the next id goes in ring
	set  map[int64]struct{}
}

// add remembers key, an id the connection sent (they start at 1),
// forgetting the oldest when full. Request ids are never reused on a
// connection, so an id is added once.
func (a *abandonedIDs) add(key int64) {
	if a.ring == nil {
		a.ring = make([]int64, maxAbandoned)
		a.set = make(map[int64]struct{}, maxAbandoned)
	}
	if old := a.ring[a.next]; old != 0 {
		delete(a.set, old)
	}
	a.ring[a.next] = key
	a.next = (a.next + 1) % len(a.ring)
	a.set[key] = struct{}{}
}

// take reports whether key was given up on, and forgets it: a second
// answer to the same id is not a late answer but a wrong one.
func (a *abandonedIDs) take(key int64) bool {
	if _, ok := a.set[key]; !ok {
		return false
	}
	delete(a.set, key)
	return true
}
