package downstream

import (
	"sync/atomic"
	"time"
)

// activity counts the requests being served and remembers when the last
// one ended, so that a draining replica can tell that its clients went
// quiet without sampling the count: a look that falls between two short
// calls sees none in flight, however busy the clients are.
type activity struct {
	epoch    time.Time    // the origin of lastEnd, read on the monotonic clock
	inflight atomic.Int64 // requests being served
	lastEnd  atomic.Int64 // when the last request ended, as time since epoch
}

func newActivity(now time.Time) *activity { return &activity{epoch: now} }

func (a *activity) begin() { a.inflight.Add(1) }

// end records that a request ended at now. The time is stored before the
// count drops, so that a look that sees the count at 0 sees this end too.
func (a *activity) end(now time.Time) {
	at := int64(now.Sub(a.epoch))
	for {
		last := a.lastEnd.Load()
		if last >= at || a.lastEnd.CompareAndSwap(last, at) {
			break
		}
	}
	a.inflight.Add(-1)
}

// quiet is how long, at now, no request has been in flight: 0 while one
// is, else the time since the last one ended (since the epoch if none
// ever ran).
func (a *activity) quiet(now time.Time) time.Duration {
	if a.inflight.Load() > 0 {
		return 0
	}
	return max(now.Sub(a.epoch)-time.Duration(a.lastEnd.Load()), 0)
}
