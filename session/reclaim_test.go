package session

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connectedKeys is a Config.Connected whose answers the test sets.
type connectedKeys struct {
	mu   sync.Mutex
	keys map[Key]bool
}

func (c *connectedKeys) set(k Key, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[Key]bool{}
	}
	c.keys[k] = on
}

func (c *connectedKeys) connected(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys[k]
}

func tryAcquire(p *Pool, key Key) (*Grant, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return p.Acquire(ctx, key)
}

// assertReclaimsUnconnected leases the two instances of a pool (lease.max_instances 2,
// lease.reclaim_idle reclaimIdle) to "listening", whose client is connected,
// then, after settle, to "gone", whose client left, each lease idle; a third
// session then reclaims gone's lease, not listening's.
func assertReclaimsUnconnected(t *testing.T, reclaimIdle time.Duration, settle func()) {
	t.Helper()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	var conn connectedKeys
	pool := startPool(t, f, Config{Server: "counter", MaxInstances: 2, ReclaimIdle: reclaimIdle, OnEvent: ev.add,
		Connected: conn.connected})
	conn.set(named("listening"), true)
	acquire(t, pool, named("listening")).Done()
	settle()
	acquire(t, pool, named("gone")).Done() // used later, but its client left

	acquire(t, pool, named("c")).Done()
	assert.Equal(t, named("gone"), ev.wait(t, "reclaimed", nil).Key)
	_, held := pool.Held(named("listening"))
	assert.True(t, held)
}

// assertNoneReclaimed checks that ev recorded no reclaimed lease.
func assertNoneReclaimed(t *testing.T, ev *events) {
	t.Helper()
	for _, e := range ev.all() {
		assert.NotEqual(t, "reclaimed", e.Kind)
	}
}

func TestReclaimAtTheCap(t *testing.T) {
	t.Parallel()

	t.Run("the lease idle longest makes room, and its session is told on its next call", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		ev := newEvents()
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 2, ReclaimIdle: time.Nanosecond, OnEvent: ev.add})
		older := acquire(t, pool, named("older"))
		older.Done()
		newer := acquire(t, pool, named("newer"))
		newer.Done()

		c := acquire(t, pool, named("c"))
		c.Done()
		assert.False(t, c.Reclaimed, "c had no lease before")
		got := ev.wait(t, "reclaimed", nil)
		assert.Equal(t, named("older"), got.Key, "the lease unused longest goes first")
		assert.Equal(t, older.Instance.PID(), got.PID)
		requireReaped(t, older.Instance.PID())
		_, held := pool.Held(named("older"))
		assert.False(t, held)
		assert.Equal(t, 2, pool.Stats().Live, "the reclaimed slot went to c: the cap holds")

		// Its next call: a fresh instance (taking the next idle one's place),
		// and the news that its state is gone, until a result told it.
		again := acquire(t, pool, named("older"))
		again.Done()
		assert.True(t, again.Reclaimed)
		assert.True(t, again.First, "a new lease, announced as one")
		assert.NotEqual(t, older.Instance.PID(), again.Instance.PID())
		read := acquire(t, pool, named("older")) // a read, whose result has no room to tell
		read.Done()
		assert.True(t, read.Reclaimed, "not told yet")
		read.Announced()
		next := acquire(t, pool, named("older"))
		next.Done()
		assert.False(t, next.Reclaimed, "told once")
		assert.False(t, next.First)
	})

	t.Run("a session without a connection goes before one with", func(t *testing.T) {
		t.Parallel()
		assertReclaimsUnconnected(t, time.Nanosecond, func() {})
	})

	t.Run("a lease used recently is not reclaimed yet: the new session waits until it is idle long enough", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		ev := newEvents()
		const idle = 400 * time.Millisecond
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 2, ReclaimIdle: idle, OnEvent: ev.add})
		busy := acquire(t, pool, named("busy")) // its call runs on
		defer busy.Done()
		acquire(t, pool, named("recent")).Done()
		lastUse := time.Now()

		c, err := tryAcquire(pool, named("c"))
		require.NoError(t, err, "waited for the recent lease to turn reclaimable, then took its place")
		c.Done()
		assert.GreaterOrEqual(t, time.Since(lastUse), idle, "reclaimed before it went unused long enough")
		assert.Less(t, time.Since(lastUse), idle+5*time.Second, "waited well past the moment it turned reclaimable")
		assert.Equal(t, named("recent"), ev.wait(t, "reclaimed", nil).Key)
		_, held := pool.Held(named("busy"))
		assert.True(t, held, "a lease with a call in flight is never reclaimed")
		assert.Equal(t, 2, pool.Stats().Live)
	})

	t.Run("waiting, it waits for a session without a connection rather than reclaim one with", func(t *testing.T) {
		t.Parallel()
		// Past its ReclaimIdle: the connected lease is reclaimable when c
		// comes, the unconnected one (most likely) not yet, and is waited for.
		assertReclaimsUnconnected(t, 300*time.Millisecond, func() { time.Sleep(350 * time.Millisecond) })
	})

	t.Run("a call that starts on the lease waited for keeps it: the new session looks again", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		ev := newEvents()
		const idle = 600 * time.Millisecond
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 1, ReclaimIdle: idle, OnEvent: ev.add})
		acquire(t, pool, named("a")).Done()

		got := make(chan error, 1)
		began := time.Now()
		go func() {
			_, err := tryAcquire(pool, named("c"))
			got <- err
		}()
		require.Eventually(t, func() bool {
			pool.mu.Lock()
			defer pool.mu.Unlock()
			return pool.acquiring[named("c")] == 1
		}, waitTimeout, time.Millisecond)
		busy := acquire(t, pool, named("a")) // a's session is at work again, before its lease turned reclaimable
		defer busy.Done()
		select {
		case err := <-got:
			require.ErrorIs(t, err, ErrCapReached, "every lease has a call in flight")
			assert.Less(t, time.Since(began), idle+5*time.Second)
		case <-time.After(waitTimeout):
			t.Fatal("the new session waited on")
		}
		assertNoneReclaimed(t, ev)
	})

	t.Run("the wait ends with the caller's own deadline", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 1, ReclaimIdle: time.Hour})
		acquire(t, pool, named("a")).Done()

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := pool.Acquire(ctx, named("c"))
		require.ErrorIs(t, err, ErrCapReached)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		_, held := pool.Held(named("a"))
		assert.True(t, held)
	})

	t.Run("a session over the cap is refused at once when every lease has a call in flight", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		ev := newEvents()
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 2, OnEvent: ev.add})
		for _, k := range []Key{named("x"), named("y")} {
			g := acquire(t, pool, k) // its call runs on
			defer g.Done()
		}

		began := time.Now()
		_, err := tryAcquire(pool, named("c"))
		require.ErrorIs(t, err, ErrCapReached)
		assert.Less(t, time.Since(began), time.Second, "no waiting")
		assert.Contains(t, err.Error(), "lease.max_instances: 2")
		assertNoneReclaimed(t, ev)
	})

	t.Run("a call in flight protects a lease however long ago it began", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		ev := newEvents()
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 1, ReclaimIdle: time.Nanosecond, OnEvent: ev.add})
		busy := acquire(t, pool, named("busy"))
		defer busy.Done()

		_, err := tryAcquire(pool, named("c"))
		require.ErrorIs(t, err, ErrCapReached)
		assertNoneReclaimed(t, ev)
	})

	t.Run("a reclaimed session refused at the cap hears why its state is gone", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		ev := newEvents()
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 1, ReclaimIdle: time.Nanosecond, OnEvent: ev.add})
		acquire(t, pool, named("a")).Done()
		taker := acquire(t, pool, named("b")) // reclaims a's, and keeps a call running
		defer taker.Done()
		ev.wait(t, "reclaimed", forKey(named("a")))

		_, err := tryAcquire(pool, named("a"))
		require.ErrorIs(t, err, ErrCapReached)
		assert.Contains(t, err.Error(), "was reclaimed")
	})
}
