package downstream

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestActivityQuietMissesNoShortCall: a client making 5ms calls 40 times a
// second, looked at every 50ms between its calls, never sees one in flight;
// the time since the last call ended still says it is busy, and says it is
// quiet once a second has passed since its last call.
func TestActivityQuietMissesNoShortCall(t *testing.T) {
	epoch := time.Now()
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	a := newActivity(epoch)
	const (
		every = 25 * time.Millisecond
		call  = 5 * time.Millisecond
		look  = 50 * time.Millisecond // how often the drainer used to look
		calls = 120                   // three seconds of them
		quiet = time.Second
	)
	// Calls begin at 0, 25ms, 50ms, ... and end 5ms later; the looks come at
	// 10ms, 60ms, 110ms, ...: never while a call runs, so a look at the count
	// alone always saw 0, and the drain ended after a second of them.
	var last time.Duration
	for i := range calls {
		begin := time.Duration(i) * every
		a.begin()
		last = begin + call
		a.end(at(last))
		if i%2 == 0 {
			when := begin + 2*call
			require.Zero(t, a.inflight.Load(), "the look at %s falls between calls", when)
			assert.Less(t, a.quiet(at(when)), look, "at %s the busy client was taken for a quiet one", when)
		}
	}
	assert.Less(t, a.quiet(at(last+quiet-time.Millisecond)), quiet, "quiet before a second passed")
	assert.GreaterOrEqual(t, a.quiet(at(last+quiet)), quiet, "quiet a second after the last call")
}

// TestActivityOverlappingCalls: while any call runs the client is busy,
// and quiet counts from the end of the call that ended last.
func TestActivityOverlappingCalls(t *testing.T) {
	epoch := time.Now()
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	a := newActivity(epoch)
	assert.Equal(t, time.Second, a.quiet(at(time.Second)), "none ran yet: quiet since the start")

	a.begin() // long
	a.begin() // short
	a.end(at(100 * time.Millisecond))
	assert.Zero(t, a.quiet(at(2*time.Second)), "the long call still runs")
	a.end(at(3 * time.Second))
	assert.Equal(t, 500*time.Millisecond, a.quiet(at(3500*time.Millisecond)))

	// Ends recorded out of order keep the later one.
	a.begin()
	a.begin()
	a.end(at(5 * time.Second))
	a.end(at(4 * time.Second))
	assert.Equal(t, time.Second, a.quiet(at(6*time.Second)))
}

// TestActivityConcurrent: calls on many goroutines leave the count at 0 and
// the last end at the latest of them.
func TestActivityConcurrent(t *testing.T) {
	epoch := time.Now()
	a := newActivity(epoch)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.begin()
			a.end(epoch.Add(time.Duration(i) * time.Millisecond))
		}()
	}
	wg.Wait()
	assert.Zero(t, a.inflight.Load())
	assert.Equal(t, time.Second-63*time.Millisecond, a.quiet(epoch.Add(time.Second)))
}
