package session

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

func TestMaxCallsRecyclesALeaseBetweenCalls(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	pool := startPool(t, f, Config{Server: "counter", MaxCalls: 2, OnEvent: ev.add})

	g1 := acquire(t, pool, named("a"))
	old := g1.Instance
	assert.Equal(t, 1, counterValue(t, old, "increment"))
	g1.Announced()
	g1.Done()
	g2 := acquire(t, pool, named("a"))
	assert.Same(t, old, g2.Instance, "the second call still runs on it")
	assert.Equal(t, 2, counterValue(t, old, "increment"))
	g2.Done()

	// Its second call was its last: it is closed at once, not at the next call.
	assert.Equal(t, old.PID(), ev.wait(t, "recycled", forKey(named("a"))).PID)
	requireReaped(t, old.PID())
	pid, held := pool.Held(named("a"))
	assert.True(t, held, "the session keeps its lease")
	assert.Zero(t, pid, "with no instance until its next call")

	g3 := acquire(t, pool, named("a"))
	defer g3.Done()
	assert.NotEqual(t, old.PID(), g3.Instance.PID(), "a new process")
	assert.True(t, g3.Recycled, "the caller is told its state was reset")
	assert.False(t, g3.First, "it is the same lease")
	assert.False(t, g3.Lost)
	assert.Equal(t, 0, counterValue(t, g3.Instance, "get"), "the state went with the old instance")
	assert.Equal(t, 1, pool.Stats().Live, "the lease kept its one slot throughout")

	infos, _ := pool.instances()
	require.Len(t, infos, 1)
	assert.Equal(t, 1, infos[0].Restarts, "the lease's second instance")
}

func TestMaxCallsReachedWhileACallRunsStartsASuccessor(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	pool := startPool(t, f, Config{Server: "counter", MaxCalls: 1})

	running := acquire(t, pool, named("a")) // not Done: still in flight
	next := acquire(t, pool, named("a"))
	defer next.Done()
	assert.NotSame(t, running.Instance, next.Instance, "a call never exceeds max_calls on one instance")
	assert.True(t, next.Recycled)
	assert.True(t, alive(running.Instance.PID()), "the call in flight keeps its instance")
	assert.Equal(t, 1, counterValue(t, running.Instance, "increment"), "and can still use it")
	assert.Equal(t, 1, pool.Stats().Draining)
	running.Done()
	requireReaped(t, running.Instance.PID())
}

func TestMaxAgeRecyclesIdleLeasesAndSpares(t *testing.T) {
	t.Parallel()
	f := newDemoFactory(t, "counter")
	ev := newEvents()
	const age = 300 * time.Millisecond
	pool := startPool(t, f, Config{Server: "counter", MaxAge: age, Prewarm: 1, OnEvent: ev.add})

	g := acquire(t, pool, named("a"))
	leased := g.Instance.PID()
	g.Done()
	began := time.Now()
	assert.Equal(t, leased, ev.wait(t, "recycled", forKey(named("a"))).PID)
	assert.GreaterOrEqual(t, time.Since(began), age/2)
	requireReaped(t, leased)
	ev.wait(t, "recycled", forKey(Key{})) // a spare aged out too, and is replaced

	fresh := acquire(t, pool, named("a"))
	defer fresh.Done()
	assert.True(t, fresh.Recycled)
	assert.NotEqual(t, leased, fresh.Instance.PID())
}

func TestSharedInstanceOverMaxRSSIsReplacedBetweenCalls(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("memory is measured on Linux only")
	}
	f := newDemoFactory(t, "tools")
	ev := newEvents()
	ledger := NewLedger()
	first := f.first(t)
	const interval = 20 * time.Millisecond
	pool := NewPool(Config{Server: "tools", Stateless: true, Ledger: ledger, UsageInterval: interval, OnEvent: ev.add}, f.start, first)
	closePool(t, pool)

	inflight := acquire(t, pool, named("a")) // a call that runs across the replacement
	began := time.Now()
	ledger.SetLimits(0, 1<<20) // 1 MiB: any Go process is over it
	replaced := ev.wait(t, "replaced", nil)
	ledger.SetLimits(0, 0) // one replacement is enough for this test
	assert.Equal(t, first.PID(), replaced.PID)
	assert.Contains(t, replaced.Err.Error(), "limits.max_rss")
	assert.GreaterOrEqual(t, time.Since(began)+interval, rssGrace*interval, "a young instance is left alone")

	next := acquire(t, pool, named("b"))
	defer next.Done()
	assert.NotEqual(t, first.PID(), next.Instance.PID(), "new calls go to the successor")
	assert.Same(t, next.Instance, pool.Shared())
	assert.Empty(t, pool.Stats().Down, "the server was never down")

	// The call in flight finishes on the old instance, which then closes.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	raw, err := inflight.Instance.CallTool(ctx, upstream.Call{Name: "echo", Arguments: json.RawMessage(`{"text":"still here"}`)})
	require.NoError(t, err)
	assert.Contains(t, string(raw), "still here")
	assert.True(t, alive(first.PID()))
	inflight.Done()
	requireReaped(t, first.PID())
}

func TestLedgerCapsInstancesAcrossServers(t *testing.T) {
	t.Parallel()
	ledger := NewLedger()
	ledger.SetLimits(3, 0)
	fa, fb := newDemoFactory(t, "counter"), newDemoFactory(t, "counter")
	a := startPool(t, fa, Config{Server: "a", Ledger: ledger})
	b := startPool(t, fb, Config{Server: "b", Ledger: ledger})
	assert.Equal(t, 2, ledger.Count(), "the instances servers start with count")

	acquire(t, a, named("s1")).Done() // a's first instance
	acquire(t, b, named("s1")).Done() // b's first instance
	acquire(t, a, named("s2")).Done() // a third: the limit
	assert.Equal(t, 3, ledger.Count())

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	began := time.Now()
	_, err := b.Acquire(ctx, named("s2"))
	require.ErrorIs(t, err, ErrLimitReached)
	assert.Less(t, time.Since(began), time.Second)
	assert.Contains(t, err.Error(), "limits.max_instances: 3")
	assert.Zero(t, fb.callCount(), "nothing was started over the limit")

	// A lease of another server ends: once its process is gone, there is room.
	require.True(t, a.Release(named("s2")))
	require.Eventually(t, func() bool { return ledger.Count() == 2 }, waitTimeout, 10*time.Millisecond)
	g := acquire(t, b, named("s2"))
	g.Done()
	assert.True(t, g.First)
	assert.Equal(t, 3, ledger.Count())

	ledger.SetLimits(0, 0)
	acquire(t, b, named("s3")).Done()
	assert.Equal(t, 4, ledger.Count(), "0 lifts the limit")
}

func TestLedgerListsEveryInstance(t *testing.T) {
	t.Parallel()
	ledger := NewLedger()
	ft, fc := newDemoFactory(t, "tools"), newDemoFactory(t, "counter")
	shared := startPool(t, ft, Config{Server: "tools", Stateless: true, Ledger: ledger})
	leased := startPool(t, fc, Config{Server: "counter", Prewarm: 1, Ledger: ledger})

	g := acquire(t, leased, named("session-1")) // in flight while listed
	defer g.Done()
	acquire(t, shared, named("x")).Done()
	acquire(t, shared, named("y")).Done()
	require.Eventually(t, func() bool { return leased.Stats().Spares == 1 }, waitTimeout, 10*time.Millisecond)

	list := ledger.Instances()
	require.Len(t, list, 3, "%+v", list)
	byRole := map[string]InstanceInfo{}
	for _, in := range list {
		byRole[in.Role] = in
		assert.NotZero(t, in.PID)
		assert.False(t, in.Started.IsZero())
		if runtime.GOOS == "linux" {
			assert.Greater(t, in.Usage.RSS, int64(1<<20), "%s %d", in.Server, in.PID)
			assert.GreaterOrEqual(t, in.Usage.Processes, 1)
		}
	}
	assert.Equal(t, "tools", byRole[RoleShared].Server)
	assert.Equal(t, int64(2), byRole[RoleShared].Calls)
	assert.Equal(t, 0, byRole[RoleShared].InFlight)
	assert.Equal(t, g.Instance.PID(), byRole[RoleLeased].PID)
	assert.Equal(t, named("session-1"), byRole[RoleLeased].Session)
	assert.Equal(t, 1, byRole[RoleLeased].InFlight)
	assert.Equal(t, "counter", byRole[RoleSpare].Server)
	assert.Equal(t, list[0].Server, "counter", "sorted by server")
}
