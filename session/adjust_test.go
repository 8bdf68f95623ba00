package session

import (
	"context"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdjustTakesEveryPoolSettingAndNothingElse sets each Config field in turn
// and checks that Adjust takes the settings that govern only the pool, and
// leaves the ones fixed for its life alone. A field added to Config fails here
// until it is put on one side or the other.
func TestAdjustTakesEveryPoolSettingAndNothingElse(t *testing.T) {
	adjusted := map[string]bool{"IdleTTL": true, "MaxInstances": true, "Prewarm": true,
		"QueueTimeout": true, "MaxAge": true, "MaxCalls": true, "PingInterval": true, "MaxLeasesPerClient": true}
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			pool := NewPool(Config{Server: "s", Stateless: true}, nil, nil)
			closePool(t, pool)
			before := pool.cfg
			var cfg Config
			v := reflect.ValueOf(&cfg).Elem().Field(i)
			switch v.Kind() {
			case reflect.Int, reflect.Int64:
				v.SetInt(1)
			case reflect.String:
				v.SetString("other")
			case reflect.Bool:
				v.SetBool(true)
			case reflect.Ptr:
				v.Set(reflect.ValueOf(NewLedger()))
			case reflect.Func:
				v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value {
					out := make([]reflect.Value, v.Type().NumOut())
					for i := range out {
						out[i] = reflect.Zero(v.Type().Out(i))
					}
					return out
				}))
			default:
				t.Fatalf("no test value for %s (%s)", f.Name, v.Kind())
			}
			pool.Adjust(cfg)
			pool.mu.Lock()
			after := reflect.ValueOf(pool.cfg).Field(i)
			pool.mu.Unlock()
			if f.Name == "MaxLeasesPerClient" {
				assert.Equal(t, 1, pool.perClient.Max(), "Adjust left the per-client share as it was")
			}
			if adjusted[f.Name] {
				assert.Equal(t, v.Interface(), after.Interface(), "Adjust left %s as it was", f.Name)
			} else if f.Type.Kind() == reflect.Func {
				assert.Equal(t, reflect.ValueOf(before).Field(i).IsNil(), after.IsNil(), "Adjust changed %s", f.Name)
			} else {
				assert.Equal(t, reflect.ValueOf(before).Field(i).Interface(), after.Interface(), "Adjust changed %s, which is fixed for the pool's life", f.Name)
			}
		})
	}
}

// TestAdjustMaxInstances: a raised cap lets a refused session, and one waiting
// in the queue, lease at once; a lowered one stops the spares over it and
// refuses new leases, while leased instances keep serving their sessions.
func TestAdjustMaxInstances(t *testing.T) {
	t.Parallel()

	t.Run("raised: the next session leases, the leased one is untouched", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		cfg := Config{Server: "counter", MaxInstances: 1}
		pool := startPool(t, f, cfg)
		a := acquire(t, pool, named("a")) // its call runs on, until the cap is raised
		counterValue(t, a.Instance, "increment")
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := pool.Acquire(ctx, named("b"))
		require.ErrorIs(t, err, ErrCapReached)
		a.Done()

		cfg.MaxInstances = 2
		pool.Adjust(cfg)
		b := acquire(t, pool, named("b"))
		b.Done()
		assert.NotEqual(t, a.Instance.PID(), b.Instance.PID())
		again := acquire(t, pool, named("a"))
		defer again.Done()
		assert.Same(t, a.Instance, again.Instance, "the leased instance was kept")
		assert.Equal(t, 2, counterValue(t, again.Instance, "increment"), "with its state")
		busyB := acquire(t, pool, named("b")) // both leases have a call in flight
		defer busyB.Done()
		_, err = pool.Acquire(ctx, named("c"))
		require.ErrorIs(t, err, ErrCapReached, "the new cap holds too")
		assert.Contains(t, err.Error(), "lease.max_instances: 2")
	})

	t.Run("raised: a session waiting in the queue leases at once", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		cfg := Config{Server: "counter", MaxInstances: 1, QueueTimeout: waitTimeout}
		pool := startPool(t, f, cfg)
		acquire(t, pool, named("a")).Done()

		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			g, err := pool.Acquire(ctx, named("b"))
			if err == nil {
				g.Done()
			}
			got <- err
		}()
		// The waiter is queued once it has asked the pool for a slot and been refused.
		require.Eventually(t, func() bool {
			pool.mu.Lock()
			defer pool.mu.Unlock()
			return pool.acquiring[named("b")] == 1
		}, waitTimeout, 5*time.Millisecond)
		cfg.MaxInstances = 2
		pool.Adjust(cfg)
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(waitTimeout):
			t.Fatal("the queued session did not lease under the raised cap")
		}
		assert.Equal(t, 2, pool.Stats().Leased)
	})

	t.Run("lowered: spares over it stop, leases stay, new leases are refused", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		ev := newEvents()
		cfg := Config{Server: "counter", MaxInstances: 4, Prewarm: 2, OnEvent: ev.add}
		pool := startPool(t, f, cfg)
		a, b := acquire(t, pool, named("a")), acquire(t, pool, named("b"))
		a.Done()
		b.Done()
		require.Eventually(t, func() bool { return pool.Stats() == Stats{Live: 4, Leased: 2, Spares: 2} }, waitTimeout, 10*time.Millisecond)

		cfg.MaxInstances = 2
		pool.Adjust(cfg)
		stopped := ev.wait(t, "spare-stopped", nil)
		requireReaped(t, stopped.PID)
		require.Eventually(t, func() bool { return pool.Stats() == Stats{Live: 2, Leased: 2} }, waitTimeout, 10*time.Millisecond,
			"the spares over the cap are stopped: %+v", pool.Stats())
		for _, g := range []*Grant{a, b} {
			assert.True(t, alive(g.Instance.PID()), "a leased instance was stopped")
			again := acquire(t, pool, g.rec.key) // its call runs on
			defer again.Done()
			assert.Same(t, g.Instance, again.Instance)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := pool.Acquire(ctx, named("c"))
		require.ErrorIs(t, err, ErrCapReached)
	})
}

// TestAdjustPrewarm: a raised prewarm starts spares, a lowered one stops them;
// neither touches a leased instance.
func TestAdjustPrewarm(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	cfg := Config{Server: "counter", OnEvent: ev.add}
	pool := startPool(t, f, cfg)
	a := acquire(t, pool, named("a")) // takes the first instance
	a.Done()

	cfg.Prewarm = 2
	pool.Adjust(cfg)
	require.Eventually(t, func() bool { return pool.Stats() == Stats{Live: 3, Leased: 1, Spares: 2} }, waitTimeout, 10*time.Millisecond,
		"two spares start: %+v", pool.Stats())

	cfg.Prewarm = 0
	pool.Adjust(cfg)
	require.Eventually(t, func() bool { return pool.Stats() == Stats{Live: 1, Leased: 1} }, waitTimeout, 10*time.Millisecond,
		"the spares stop: %+v", pool.Stats())
	var stopped []int
	for _, e := range ev.all() {
		if e.Kind == "spare-stopped" {
			stopped = append(stopped, e.PID)
		}
	}
	assert.Len(t, stopped, 2)
	assert.NotContains(t, stopped, a.Instance.PID())
	pid, ok := pool.Held(named("a"))
	require.True(t, ok)
	assert.Equal(t, a.Instance.PID(), pid)
}

// TestAdjustIdleTTL: a pool that started without lease.idle_ttl ends idle
// leases once one is set, and one whose idle_ttl is lifted ends none.
func TestAdjustIdleTTL(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	cfg := Config{Server: "counter", OnEvent: ev.add}
	pool := startPool(t, f, cfg)
	a := acquire(t, pool, named("a"))
	a.Done()
	waitLooked(t, pool, 1) // expiry runs, with nothing to expire

	cfg.IdleTTL = 100 * time.Millisecond
	pool.Adjust(cfg)
	assert.Equal(t, a.Instance.PID(), ev.wait(t, "expired", forKey(named("a"))).PID)
	requireReaped(t, a.Instance.PID())

	cfg.IdleTTL = 0
	pool.Adjust(cfg)
	b := acquire(t, pool, named("b"))
	b.Done()
	// An hour later, by the pool's clock, the lease is not idle past any ttl.
	pool.expire(time.Now().Add(time.Hour))
	pid, held := pool.Held(named("b"))
	assert.True(t, held, "a lease expired after lease.idle_ttl was lifted")
	assert.Equal(t, b.Instance.PID(), pid)
}

// TestAdjustPingInterval: a shared instance that was never pinged is pinged
// once ping_interval is set, and replaced when it does not answer.
func TestAdjustPingInterval(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "tools")
	ev := newEvents()
	first := f.first(t)
	cfg := Config{Server: "tools", Stateless: true, OnEvent: ev.add}
	pool := NewPool(cfg, f.start, first)
	closePool(t, pool)

	waitLooked(t, pool, 1) // the shared instance is watched, unpinged
	// A stopped process keeps its pipes open but answers nothing.
	require.NoError(t, syscall.Kill(first.PID(), syscall.SIGSTOP))
	cfg.PingInterval = 100 * time.Millisecond
	pool.Adjust(cfg)
	lost := ev.wait(t, "lost", nil)
	assert.Equal(t, first.PID(), lost.PID)
	assert.Contains(t, lost.Err.Error(), "ping")
	ev.wait(t, "restarted", nil)
}

// waitLooked waits until the pool's timed loops have read its settings n
// times in all.
func waitLooked(t *testing.T, p *Pool, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.looks >= n
	}, waitTimeout, time.Millisecond)
}
