package session

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// gatedFactory starts instances with f, each only once the test lets it
// finish: entered says a start began, release lets it return.
type gatedFactory struct {
	f       *demoFactory
	entered chan struct{}
	release chan struct{}
	started chan *upstream.Instance
}

func newGatedFactory(f *demoFactory) *gatedFactory {
	return &gatedFactory{f: f, entered: make(chan struct{}, 8), release: make(chan struct{}), started: make(chan *upstream.Instance, 8)}
}

func (g *gatedFactory) start(ctx context.Context) (*upstream.Instance, error) {
	g.entered <- struct{}{}
	<-g.release
	inst, err := g.f.start(ctx)
	if err == nil {
		g.started <- inst
	}
	return inst, err
}

// TestSessionEndedWhileItsInstanceStartsLeavesNoLease: a session that ends
// while the instance of its first call starts (a read or a call in flight
// when the client sends DELETE) leaves no lease behind, and the instance's
// process is closed: with no lease.idle_ttl nothing else would ever end it.
func TestSessionEndedWhileItsInstanceStartsLeavesNoLease(t *testing.T) {
	t.Parallel()
	gf := newGatedFactory(newDemoFactory(t, "counter"))
	ev := newEvents()
	pool := NewPool(Config{Server: "counter", OnEvent: ev.add}, gf.start, nil)
	closePool(t, pool)

	type result struct {
		g   *Grant
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		g, err := pool.Acquire(context.Background(), named("s"))
		first <- result{g, err}
	}()
	<-gf.entered
	// A second call of the same session waits for the instance the first starts.
	go func() {
		g, err := pool.Acquire(context.Background(), named("s"))
		second <- result{g, err}
	}()
	require.Eventually(t, func() bool {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		return pool.acquiring[named("s")] == 2
	}, waitTimeout, time.Millisecond, "the second call never waited for the instance")

	pool.EndSession(named("s"))
	close(gf.release)
	inst := <-gf.started

	for _, ch := range []chan result{first, second} {
		r := <-ch
		if r.g != nil {
			r.g.Done()
		}
		require.ErrorIs(t, r.err, ErrSessionEnded, "a call of an ended session got an instance")
	}
	_, held := pool.Held(named("s"))
	assert.False(t, held, "an ended session holds a lease")
	requireReaped(t, inst.PID())
	assert.Equal(t, 1, gf.f.callCount(), "an instance was started for an ended session")

	// The key is free again afterwards: a new session with it leases normally.
	go func() { <-gf.entered }()
	g := acquire(t, pool, named("s"))
	g.Done()
	_, held = pool.Held(named("s"))
	assert.True(t, held)
}

// TestLeaseTakenAsItExpiresIsKept: a call that takes a lease after expire
// found it idle, and before expire ended it, keeps it: the lease is ended
// only if it is still idle when it is ended.
func TestLeaseTakenAsItExpiresIsKept(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	const ttl = time.Hour // expire runs only when the test calls it
	pool := startPool(t, f, Config{Server: "counter", IdleTTL: ttl, OnEvent: ev.add})

	first := acquire(t, pool, named("s"))
	pid := first.Instance.PID()
	first.Done()
	var again *Grant
	pool.afterIdleScan = func() { again = acquire(t, pool, named("s")) }
	pool.expire(time.Now().Add(2 * ttl)) // "s" looks idle
	require.NotNil(t, again)
	defer again.Done()
	assert.Equal(t, pid, again.Instance.PID(), "the call reached the session's instance")
	held, ok := pool.Held(named("s"))
	assert.True(t, ok, "a lease in use was ended as idle")
	assert.Equal(t, pid, held)
	for _, e := range ev.all() {
		assert.NotEqual(t, "expired", e.Kind, "a lease in use expired")
	}
}
