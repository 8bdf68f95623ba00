package upstream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runLog records the runs of a coalescer: how many triggers had happened
// when each run started, and the most runs ever under way at once.
type runLog struct {
	triggered  atomic.Int64
	running    atomic.Int64
	maxRunning atomic.Int64
	mu         sync.Mutex
	starts     []int64
	idle       chan struct{} // receives after every run
}

func (l *runLog) run() {
	n := l.running.Add(1)
	for {
		m := l.maxRunning.Load()
		if n <= m || l.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	l.mu.Lock()
	l.starts = append(l.starts, l.triggered.Load())
	l.mu.Unlock()
	l.running.Add(-1)
	select {
	case l.idle <- struct{}{}:
	default:
	}
}

func (l *runLog) snapshot() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.starts...)
}

func TestCoalescerFoldsAFlood(t *testing.T) {
	// The first run is held until a concurrent flood of triggers is over:
	// however fast or slow the machine, the whole flood then falls while a
	// run is under way and must cost exactly one run more.
	log := &runLog{idle: make(chan struct{}, 1)}
	entered := make(chan struct{})
	release := make(chan struct{})
	var first sync.Once
	c := newCoalescer(func() {
		first.Do(func() {
			close(entered)
			<-release
		})
		log.run()
	})
	c.trigger()
	<-entered
	const senders, each = 4, 50_000
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				log.triggered.Add(1)
				c.trigger()
			}
		}()
	}
	wg.Wait()
	close(release)
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.running && !c.again
	}, waitTimeout, time.Millisecond, "the coalescer goes idle")
	starts := log.snapshot()
	require.Len(t, starts, 2, "a flood during a run is folded into one more run")
	assert.Equal(t, int64(senders*each), starts[1], "the last run starts after the last trigger")
	assert.Equal(t, int64(1), log.maxRunning.Load(), "never two runs at once")
}

func TestCoalescerRunsOnceMoreForTriggersDuringARun(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var runs atomic.Int64
	c := newCoalescer(func() {
		if runs.Add(1) == 1 {
			close(entered)
			<-release
		}
	})
	c.trigger()
	<-entered
	for range 5 { // during the first run: folded into one more
		c.trigger()
	}
	close(release)
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.running
	}, waitTimeout, time.Millisecond)
	assert.Equal(t, int64(2), runs.Load())
	c.trigger() // idle again: a trigger starts a run of its own
	require.Eventually(t, func() bool { return runs.Load() == 3 }, waitTimeout, time.Millisecond)
}

func TestSlots(t *testing.T) {
	s := newSlots(2)
	assert.True(t, s.take())
	assert.True(t, s.take())
	assert.False(t, s.take(), "a full set refuses at once")
	s.release()
	assert.True(t, s.take())
}
