package session

import (
	"context"
	"encoding/json"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// counterValue calls a counter tool and returns the counter's value.
func counterValue(t *testing.T, inst *upstream.Instance, tool string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	raw, err := inst.CallTool(ctx, upstream.Call{Name: tool, Arguments: json.RawMessage(`{}`)})
	require.NoError(t, err)
	var res struct {
		Structured struct {
			Value int `json:"value"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	return res.Structured.Value
}

// watchedPool starts a pool of cfg on the demo server spec, its first
// instance given (first), its events recorded in ev, closed when the test
// ends.
func watchedPool(t *testing.T, spec string, cfg Config) (pool *Pool, first *upstream.Instance, ev *events) {
	t.Helper()
	f := newDemoFactory(t, spec)
	ev = newEvents()
	first = f.first(t)
	cfg.OnEvent = ev.add
	pool = NewPool(cfg, f.start, first)
	closePool(t, pool)
	return pool, first, ev
}

func TestStatelessSharesOneInstanceAndRestartsIt(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "tools")
	ev := newEvents()
	first := f.first(t)
	pool := NewPool(Config{Server: "tools", Stateless: true, OnEvent: ev.add}, f.start, first)
	closePool(t, pool)
	require.True(t, pool.Stateless())

	a, b := acquire(t, pool, named("a")), acquire(t, pool, named("b"))
	assert.Same(t, first, a.Instance)
	assert.Same(t, first, b.Instance)
	assert.False(t, a.First, "a shared instance is nobody's lease")
	a.Done()
	b.Done()
	st := pool.Stats()
	assert.Equal(t, first.PID(), st.SharedPID)
	assert.True(t, st.SharedAlive)
	assert.Empty(t, st.Down)
	_, held := pool.Held(named("a"))
	assert.False(t, held)
	assert.Zero(t, f.callCount())

	// Kill it: the pool notices, reports the loss, and restarts it.
	require.NoError(t, syscall.Kill(first.PID(), syscall.SIGKILL))
	lost := ev.wait(t, "lost", nil)
	assert.Equal(t, first.PID(), lost.PID)
	assert.Error(t, lost.Err)

	// Until the restart, calls fail at once and say why.
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := pool.Acquire(ctx, named("a")); err != nil {
		assert.Contains(t, err.Error(), "down")
		assert.Contains(t, err.Error(), `"tools"`)
		assert.Less(t, time.Since(began), time.Second, "a call to a down server fails fast")
	} else {
		// Only possible if the restart already happened.
		require.NotEmpty(t, ev.wait(t, "restarted", nil))
	}

	restarted := ev.wait(t, "restarted", nil)
	assert.NotEqual(t, first.PID(), restarted.PID)
	assert.Equal(t, 1, f.callCount())
	requireReaped(t, first.PID())

	g := acquire(t, pool, named("a"))
	defer g.Done()
	assert.Equal(t, restarted.PID, g.Instance.PID())
	assert.Same(t, g.Instance, pool.Shared())
	raw, err := g.Instance.CallTool(ctx, upstream.Call{Name: "echo", Arguments: json.RawMessage(`{"text":"back"}`)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[{"type":"text","text":"back"}]}`, string(raw))
	st = pool.Stats()
	assert.Empty(t, st.Down)
	assert.True(t, st.SharedAlive)
}

func TestStatelessInstanceThatStopsAnsweringPingsIsReplaced(t *testing.T) {
	t.Parallel()
	_, first, ev := watchedPool(t, "tools", Config{Server: "tools", Stateless: true, PingInterval: 100 * time.Millisecond})

	// A stopped process keeps its pipes open but answers nothing.
	require.NoError(t, syscall.Kill(first.PID(), syscall.SIGSTOP))
	lost := ev.wait(t, "lost", nil)
	require.Error(t, lost.Err)
	assert.Contains(t, lost.Err.Error(), "ping")
	restarted := ev.wait(t, "restarted", nil)
	assert.NotEqual(t, first.PID(), restarted.PID)
	requireReaped(t, first.PID())
}

func TestStatefulLeases(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	first := f.first(t)
	pool := NewPool(Config{Server: "counter", OnEvent: ev.add}, f.start, first)
	closePool(t, pool)
	require.False(t, pool.Stateless())

	// The instance that discovered the tools is the first lease: no start.
	a1 := acquire(t, pool, named("a"))
	assert.Same(t, first, a1.Instance)
	assert.True(t, a1.First)
	assert.False(t, a1.Lost)
	assert.Zero(t, f.callCount())
	assert.Equal(t, 1, counterValue(t, a1.Instance, "increment"))
	a1.Done()

	// Until the session is told it holds the lease (a tool result carries the
	// reminder), every grant says First: its first call may have been a read.
	again := acquire(t, pool, named("a"))
	assert.True(t, again.First, "not yet announced")
	again.Announced()
	again.Done()

	a2 := acquire(t, pool, named("a"))
	assert.Same(t, first, a2.Instance, "the same key keeps its instance")
	assert.False(t, a2.First, "only the first grant of a lease is First")
	assert.Equal(t, 2, counterValue(t, a2.Instance, "increment"))
	a2.Done()

	b := acquire(t, pool, named("b"))
	assert.NotEqual(t, first.PID(), b.Instance.PID(), "another key gets its own instance")
	assert.True(t, b.First)
	assert.Equal(t, 1, f.callCount())
	assert.Equal(t, 0, counterValue(t, b.Instance, "get"), "state is not shared between leases")
	b.Done()
	pidB := b.Instance.PID()

	pid, ok := pool.Held(named("a"))
	assert.True(t, ok)
	assert.Equal(t, first.PID(), pid)
	st := pool.Stats()
	assert.Equal(t, 2, st.Leased)
	assert.Equal(t, 2, st.Live)
	assert.Zero(t, st.SharedPID)
	assert.Equal(t, first.PID(), ev.wait(t, "leased", forKey(named("a"))).PID)

	t.Run("Release stops the instance", func(t *testing.T) {
		require.True(t, pool.Release(named("a")))
		assert.Equal(t, first.PID(), ev.wait(t, "released", forKey(named("a"))).PID)
		requireReaped(t, first.PID())
		_, ok := pool.Held(named("a"))
		assert.False(t, ok)
		assert.False(t, pool.Release(named("a")), "nothing left to release")

		again := acquire(t, pool, named("a"))
		defer again.Done()
		assert.True(t, again.First, "a fresh lease after release")
		assert.NotEqual(t, first.PID(), again.Instance.PID())
		assert.Equal(t, 0, counterValue(t, again.Instance, "get"), "the old state is gone")
	})

	t.Run("EndSession stops the instance", func(t *testing.T) {
		pool.EndSession(named("b"))
		assert.Equal(t, pidB, ev.wait(t, "session-ended", forKey(named("b"))).PID)
		requireReaped(t, pidB)
		pool.EndSession(named("b")) // nothing left: no-op

		again := acquire(t, pool, named("b"))
		defer again.Done()
		assert.True(t, again.First)
		assert.NotEqual(t, pidB, again.Instance.PID())
	})
}

func TestIdleLeasesExpireButNotDuringACall(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	const ttl = 200 * time.Millisecond
	pool := startPool(t, f, Config{Server: "counter", IdleTTL: ttl, OnEvent: ev.add})

	busy := acquire(t, pool, named("busy")) // not Done: a call in flight
	busyPID := busy.Instance.PID()
	idle := acquire(t, pool, named("idle"))
	idlePID := idle.Instance.PID()
	idle.Done()

	began := time.Now()
	expired := ev.wait(t, "expired", forKey(named("idle")))
	assert.Equal(t, idlePID, expired.PID)
	assert.GreaterOrEqual(t, time.Since(began), ttl/2, "not before it was idle for a while")
	requireReaped(t, idlePID)

	// A lease used after "busy" became busy expires too; by then "busy",
	// older and still in a call, has been looked at several times.
	later := acquire(t, pool, named("later"))
	later.Done()
	ev.wait(t, "expired", forKey(named("later")))
	for _, e := range ev.all() {
		assert.False(t, e.Kind == "expired" && e.Key == named("busy"), "a lease with a call in flight expired")
	}
	pid, ok := pool.Held(named("busy"))
	require.True(t, ok)
	assert.Equal(t, busyPID, pid)
	assert.True(t, alive(busyPID))

	// Once its call ends it is idle and expires like any other.
	busy.Done()
	ev.wait(t, "expired", forKey(named("busy")))
	requireReaped(t, busyPID)
}

// acquireOverBusyCap leases pool's one instance (max_instances: 1) to
// named("a"), whose call runs on until the test ends, then asks for
// named("b"), which the cap refuses; it returns how long that took and the
// refusal.
func acquireOverBusyCap(t *testing.T, pool *Pool) (took time.Duration, refused error) {
	t.Helper()
	busy := acquire(t, pool, named("a"))
	t.Cleanup(busy.Done)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	began := time.Now()
	_, err := pool.Acquire(ctx, named("b"))
	took = time.Since(began)
	require.ErrorIs(t, err, ErrCapReached)
	return took, err
}

func TestMaxInstancesCapsLeases(t *testing.T) {
	t.Parallel()

	t.Run("a session over the cap is refused at once when every lease has a call in flight, told which key to change", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 1})
		took, err := acquireOverBusyCap(t, pool)
		assert.Less(t, took, time.Second, "no waiting out the call's timeout")
		assert.Contains(t, err.Error(), `server "counter"`)
		assert.Contains(t, err.Error(), "lease.max_instances: 1")
		assert.Contains(t, err.Error(), "lease.queue_timeout")
		assert.Zero(t, f.callCount(), "nothing was started over the cap")
	})

	t.Run("with lease.queue_timeout it waits that long", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		const queue = 300 * time.Millisecond
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 1, QueueTimeout: queue})
		took, err := acquireOverBusyCap(t, pool)
		assert.GreaterOrEqual(t, took, queue, "it waited for capacity")
		assert.Contains(t, err.Error(), "none freed within lease.queue_timeout (300ms)")
		assert.Zero(t, f.callCount(), "nothing was started over the cap")

		// A caller's own deadline ends the wait too.
		short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancelShort()
		_, err = pool.Acquire(short, named("b"))
		require.ErrorIs(t, err, ErrCapReached)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Zero(t, pool.Stats().Waiting, "a wait that ended counts no more")
	})

	t.Run("a queued session gets the instance a release frees", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		pool := startPool(t, f, Config{Server: "counter", MaxInstances: 1, QueueTimeout: waitTimeout})
		a := acquire(t, pool, named("a"))
		a.Done()

		got := make(chan *Grant, 1)
		failed := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			g, err := pool.Acquire(ctx, named("b"))
			if err != nil {
				failed <- err
				return
			}
			got <- g
		}()
		// The status counts it as waiting at the cap, and only then is a lease released.
		require.Eventually(t, func() bool { return pool.Stats().Waiting == 1 }, waitTimeout, time.Millisecond,
			"the second session never waited at the cap")
		require.True(t, pool.Release(named("a")))
		select {
		case g := <-got:
			defer g.Done()
			assert.True(t, g.First)
			assert.NotEqual(t, a.Instance.PID(), g.Instance.PID())
		case err := <-failed:
			t.Fatalf("Acquire failed: %v", err)
		case <-time.After(waitTimeout):
			t.Fatal("Acquire did not get the freed capacity")
		}
		assert.Equal(t, 1, pool.Stats().Live)
		assert.Zero(t, pool.Stats().Waiting, "nothing waits once the session leased")
	})
}

func TestPrewarmKeepsSparesReady(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		prewarm   int
		withFirst bool
	}{
		{"two spares including the first instance", 2, true},
		{"three spares including the first instance", 3, true},
		{"two spares without a first instance", 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newDemoFactory(t, "counter")
			var first *upstream.Instance
			if tc.withFirst {
				first = f.first(t)
			}
			pool := NewPool(Config{Server: "counter", Prewarm: tc.prewarm}, f.start, first)
			closePool(t, pool)
			spares := func() bool { return pool.Stats().Spares == tc.prewarm }
			if !assert.Eventually(t, spares, 5*time.Second, 10*time.Millisecond) {
				t.Fatalf("spares never reached %d: %+v", tc.prewarm, pool.Stats())
			}

			// A lease takes a spare, which is replaced.
			g := acquire(t, pool, named("a"))
			defer g.Done()
			if !assert.Eventually(t, spares, 5*time.Second, 10*time.Millisecond) {
				t.Fatalf("spares after a lease never reached %d: %+v", tc.prewarm, pool.Stats())
			}
			st := pool.Stats()
			assert.Equal(t, tc.prewarm+1, st.Live)
			assert.Equal(t, 1, st.Leased)
		})
	}
}

func TestLeaseWhoseInstanceDiedIsReplacedAndSaysSo(t *testing.T) {
	t.Parallel()
	pool, first, ev := watchedPool(t, "counter", Config{Server: "counter"})

	g := acquire(t, pool, named("a"))
	assert.Equal(t, 1, counterValue(t, g.Instance, "increment"))
	g.Done()
	require.NoError(t, syscall.Kill(first.PID(), syscall.SIGKILL))
	select {
	case <-first.Done():
	case <-time.After(waitTimeout):
		t.Fatal("the instance did not notice its process died")
	}

	fresh := acquire(t, pool, named("a"))
	defer fresh.Done()
	assert.True(t, fresh.Lost)
	assert.True(t, fresh.First)
	fresh.Announced()
	assert.NotEqual(t, first.PID(), fresh.Instance.PID())
	assert.Equal(t, 0, counterValue(t, fresh.Instance, "get"))
	assert.Equal(t, first.PID(), ev.wait(t, "lost", forKey(named("a"))).PID)

	next := acquire(t, pool, named("a"))
	defer next.Done()
	assert.False(t, next.Lost, "Lost is said once")
	assert.False(t, next.First)
	assert.Same(t, fresh.Instance, next.Instance)
	assert.Equal(t, 1, pool.Stats().Live)
}

func TestCloseWaitsForCallsThenStopsEverything(t *testing.T) {
	t.Parallel()

	t.Run("until the call ends", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "counter")
		pool := NewPool(Config{Server: "counter", Prewarm: 1}, f.start, f.first(t))
		inflight := acquire(t, pool, named("a"))
		idle := acquire(t, pool, named("b"))
		idle.Done()
		require.Eventually(t, func() bool { return pool.Stats().Spares == 1 }, waitTimeout, 10*time.Millisecond)

		closed := make(chan struct{})
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			pool.Close(ctx)
			close(closed)
		}()
		// Closing refuses new calls at once...
		require.Eventually(t, func() bool {
			g, err := pool.Acquire(context.Background(), named("a"))
			if err == nil {
				g.Done() // Close had not begun yet
			}
			return err != nil
		}, waitTimeout, 5*time.Millisecond)
		_, err := pool.Acquire(context.Background(), named("a"))
		require.ErrorIs(t, err, ErrClosed)
		// ...but lets the call in flight finish on a live instance.
		select {
		case <-closed:
			t.Fatal("Close returned while a call was in flight")
		default:
		}
		assert.Equal(t, 3, counterValue(t, inflight.Instance, "increment")+2)
		inflight.Done()
		select {
		case <-closed:
		case <-time.After(waitTimeout):
			t.Fatal("Close did not return after the call ended")
		}
		for _, pid := range f.started() {
			assert.False(t, alive(pid), "pid %d outlived Close", pid)
		}
	})

	t.Run("bounded by its context", func(t *testing.T) {
		t.Parallel()
		f := newDemoFactory(t, "tools")
		pool := NewPool(Config{Server: "tools", Stateless: true}, f.start, f.first(t))
		stuck := acquire(t, pool, named("a"))
		defer stuck.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		began := time.Now()
		pool.Close(ctx)
		assert.GreaterOrEqual(t, time.Since(began), 150*time.Millisecond)
		assert.Less(t, time.Since(began), 5*time.Second)
		for _, pid := range f.started() {
			assert.False(t, alive(pid), "pid %d outlived Close", pid)
		}
		_, err := pool.Acquire(context.Background(), named("a"))
		assert.ErrorIs(t, err, ErrClosed)
		pool.Close(context.Background()) // idempotent
	})
}

func TestConcurrentKeysGetDistinctInstances(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	pool := startPool(t, f, Config{Server: "counter"})

	const keys = 20
	grants := make([]*Grant, keys)
	errs := make([]error, keys)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			grants[i], errs[i] = pool.Acquire(ctx, named(string(rune('A'+i))))
		}()
	}
	wg.Wait()
	pids := map[int]bool{}
	for i := range keys {
		require.NoError(t, errs[i])
		assert.True(t, grants[i].First)
		pids[grants[i].Instance.PID()] = true
		grants[i].Done()
	}
	assert.Len(t, pids, keys, "every key has its own process")
	assert.Equal(t, keys, pool.Stats().Leased)
	assert.Equal(t, keys-1, f.callCount(), "the first instance served one key")
}

// Release promises to stop a lease's instance only once its calls finish.
func TestReleaseLetsACallInFlightFinish(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "tools")
	ev := newEvents()
	pool := startPool(t, f, Config{Server: "tools", OnEvent: ev.add})

	g := acquire(t, pool, named("a"))
	progressed := make(chan struct{})
	var once sync.Once
	type outcome struct {
		raw json.RawMessage
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		raw, err := g.Instance.CallTool(ctx, upstream.Call{
			Name: "slow", Arguments: json.RawMessage(`{"seconds":0.5,"steps":5}`),
			ProgressToken: json.RawMessage(`"t"`),
			OnProgress:    func(json.RawMessage) { once.Do(func() { close(progressed) }) },
		})
		g.Done()
		done <- outcome{raw, err}
	}()
	select {
	case <-progressed:
	case <-time.After(waitTimeout):
		t.Fatal("the slow call never reported progress")
	}
	require.True(t, pool.Release(named("a")))
	_, held := pool.Held(named("a"))
	assert.False(t, held, "the lease ends at once: the session's next call gets a new instance")

	res := <-done
	require.NoError(t, res.err, "the call in flight was cut off by Release")
	assert.JSONEq(t, `{"content":[{"type":"text","text":"done after 5 steps"}]}`, string(res.raw))
	requireReaped(t, g.Instance.PID())
}

// TestSharedInstanceThatKeepsCrashingIsRestartedEverMoreSlowly: an instance that dies
// right after each restart counts as a failed start, so the wait before the next
// restart doubles each time (250 ms, 500 ms, 1 s, 2 s) instead of staying at the
// first step for ever.
func TestSharedInstanceThatKeepsCrashingIsRestartedEverMoreSlowly(t *testing.T) {
	t.Parallel()
	_, first, ev := watchedPool(t, "tools", Config{Server: "tools", Stateless: true})

	pid := first.PID()
	seen := map[int]bool{pid: true}
	var waits []time.Duration
	for range 4 {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		ev.wait(t, "lost", func(e Event) bool { return e.PID == pid })
		lost := time.Now()
		restarted := ev.wait(t, "restarted", func(e Event) bool { return !seen[e.PID] })
		waits = append(waits, time.Since(lost))
		pid = restarted.PID
		seen[pid] = true
	}
	t.Logf("waits before each restart: %v", waits)
	for i, least := range []time.Duration{minBackoff, 2 * minBackoff, 4 * minBackoff, 8 * minBackoff} {
		assert.GreaterOrEqual(t, waits[i], least-50*time.Millisecond, "restart %d came before its backoff", i+1)
	}
}

// A holder at MaxLeasesPerClient is refused a new lease at once, naming the
// cap, while another holder still leases one of the instances left and the
// holder's own leases go on; a lease that ends gives its place back.
func TestMaxLeasesPerClientKeepsInstancesForOthers(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	pool := startPool(t, f, Config{Server: "counter", MaxInstances: 4, MaxLeasesPerClient: 2, QueueTimeout: waitTimeout})
	as := func(key Key, holder string) (*Grant, error) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		return pool.AcquireAs(ctx, key, holder)
	}
	for _, key := range []Key{named("a1"), named("a2")} {
		g, err := as(key, "address 10.0.0.1")
		require.NoError(t, err)
		g.Done()
	}
	began := time.Now()
	_, err := as(named("a3"), "address 10.0.0.1")
	require.Error(t, err)
	assert.Less(t, time.Since(began), time.Second, "refused at once, not queued")
	assert.Contains(t, err.Error(), `address 10.0.0.1 holds its maximum of 2 leased instances of server "counter" (--max-leases-per-client)`)

	g, err := as(named("a1"), "address 10.0.0.1")
	require.NoError(t, err, "a lease it holds still serves it")
	g.Done()
	g, err = as(named("b1"), "address 10.0.0.2")
	require.NoError(t, err, "another client still leases")
	g.Done()

	require.True(t, pool.Release(named("a2")))
	g, err = as(named("a3"), "address 10.0.0.1")
	require.NoError(t, err, "a released lease gives its place back")
	g.Done()
	assert.Equal(t, 3, pool.Stats().Leased)
}
