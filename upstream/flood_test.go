package upstream

import (
	"context"
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests below count goroutines, so they do not run in parallel: top-level
// tests that are not parallel run while no parallel test does.

// maxGoroutines records the most goroutines seen.
type maxGoroutines struct{ peak atomic.Int64 }

func (m *maxGoroutines) sample() {
	n := int64(runtime.NumGoroutine())
	for {
		p := m.peak.Load()
		if n <= p || m.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// sampleUntil samples the goroutine count every millisecond until stop is
// closed.
func (m *maxGoroutines) sampleUntil(stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			m.sample()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

func TestListChangedFloodIsCoalesced(t *testing.T) {
	baseline := runtime.NumGoroutine()
	var goroutines maxGoroutines
	var runs, running, maxRunning atomic.Int64
	opts := Options{OnToolsChanged: func(inst *Instance) {
		n := running.Add(1)
		defer running.Add(-1)
		if n > maxRunning.Load() {
			maxRunning.Store(n)
		}
		runs.Add(1)
		goroutines.sample()
		// What the aggregator does: re-list the server.
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := inst.ListTools(ctx)
		assert.NoError(t, err)
	}}
	inst := startDemo(t, "misbehave flood", opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	stop := make(chan struct{})
	sampled := goroutines.sampleUntil(stop)
	raw, err := inst.CallTool(ctx, Call{Name: "flood", Arguments: json.RawMessage(`{"seconds":2}`)})
	require.NoError(t, err)
	var res struct {
		Structured struct {
			Sent int64 `json:"sent"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(raw, &res))
	sent := res.Structured.Sent
	require.Greater(t, sent, int64(10_000), "the flood is a flood")

	// Every notification came before the result, so the runs they cause
	// settle; wait until none is under way or pending.
	require.Eventually(t, func() bool {
		c := inst.listChanged["tools"]
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.running
	}, waitTimeout, time.Millisecond, "the re-lists never settle")
	close(stop)
	<-sampled

	t.Logf("%d notifications, %d runs, at most %d goroutines (%d before)", sent, runs.Load(), goroutines.peak.Load(), baseline)
	assert.GreaterOrEqual(t, runs.Load(), int64(1))
	assert.Less(t, runs.Load()*20, sent, "runs are far fewer than notifications")
	assert.Equal(t, int64(1), maxRunning.Load(), "never two runs at once")
	assert.Less(t, goroutines.peak.Load(), int64(baseline+50), "goroutines do not grow with the flood")
}

func TestServerRequestFloodIsBounded(t *testing.T) {
	rec := newLogRecorder()
	inst := startDemo(t, "misbehave ping-flood 20000", Options{Logger: rec.Logger()})
	baseline := runtime.NumGoroutine()
	var goroutines maxGoroutines
	stop := make(chan struct{})
	sampled := goroutines.sampleUntil(stop)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	raw, err := inst.CallTool(ctx, Call{Name: "ping_tool", Arguments: json.RawMessage(`{}`)})
	close(stop)
	<-sampled
	require.NoError(t, err)
	assert.Contains(t, string(raw), "pong")

	t.Logf("at most %d goroutines (%d before)", goroutines.peak.Load(), baseline)
	assert.Less(t, goroutines.peak.Load(), int64(baseline+100), "goroutines do not grow with the flood")
	// The server did not read while it flooded, so most requests found no
	// free slot; that is said once a second, not once a request.
	rec.WaitFor(t, "more concurrent requests than the aggregator handles")
	require.NoError(t, inst.Ping(ctx), "the instance still serves")
}
