package proxy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
)

// cancelRecorder is a request whose Cancel records its causes.
type cancelRecorder struct {
	mu     sync.Mutex
	causes []error
	once   sync.Once
	done   chan struct{}
}

func newCancelRecorder() (*cancelRecorder, *downstream.Request) {
	r := &cancelRecorder{done: make(chan struct{})}
	return r, &downstream.Request{Cancel: func(cause error) {
		r.mu.Lock()
		r.causes = append(r.causes, cause)
		r.mu.Unlock()
		r.once.Do(func() { close(r.done) })
	}}
}

func (r *cancelRecorder) cancelled() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.causes...)
}

// awaitCancel waits for r's first cancellation; the bound is far beyond any
// timeout these tests set, and only a deadline that never fires reaches it.
func (r *cancelRecorder) awaitCancel(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the request was never cancelled")
	}
}

// A call's deadline times out with ErrTimeout as the cause of its
// request's context.
func TestCallDeadlineTimesOut(t *testing.T) {
	rec, req := newCancelRecorder()
	ctx, d := callDeadline(context.Background(), req, time.Millisecond, 0)
	defer d.stop()
	assert.Equal(t, context.Background(), ctx, "the call uses its request's own context")
	rec.awaitCancel(t)
	assert.True(t, errors.Is(rec.cancelled()[0], ErrTimeout))
}

// A pooled deadline serves call after call; what is left of an earlier
// call (a progress notification that comes late, or a task's, which
// outlives its call; its timer firing late) neither pushes back nor
// cancels a later call, whose own timeout still fires.
func TestPooledDeadlineIgnoresEarlierUses(t *testing.T) {
	d := &deadline{pooled: true} // out of the pool: no other test can take it
	first, req1 := newCancelRecorder()
	d.arm(req1, time.Hour, monoNow())
	use1 := d.uses()
	require.True(t, d.halt())
	require.False(t, d.halt(), "stopped once")

	d.expire() // the first use's timer, late
	assert.Empty(t, first.cancelled(), "a stopped use is not cancelled")

	second, req2 := newCancelRecorder()
	d.arm(req2, time.Hour, monoNow())
	d.mu.Lock()
	when := d.when
	d.mu.Unlock()
	d.pushBack(use1) // the first call's progress, after its end
	d.mu.Lock()
	assert.Equal(t, when, d.when, "the first call's progress pushed back the second's timeout")
	d.mu.Unlock()
	d.expire() // the first use's timer, later still: the second's time has not come
	assert.Empty(t, second.cancelled())
	d.pushBack(d.uses()) // its own progress counts
	d.mu.Lock()
	assert.Greater(t, d.when, when, "the second call's own progress did not push back its timeout")
	d.mu.Unlock()
	require.True(t, d.halt())

	third, req3 := newCancelRecorder()
	d.arm(req3, time.Millisecond, monoNow())
	third.awaitCancel(t)
	assert.True(t, errors.Is(third.cancelled()[0], ErrTimeout))
	d.halt()
	assert.Empty(t, first.cancelled())
	assert.Empty(t, second.cancelled())
}

// A paused deadline does not time out; reset starts its whole timeout
// again.
func TestPooledDeadlinePause(t *testing.T) {
	d := &deadline{pooled: true}
	rec, req := newCancelRecorder()
	d.arm(req, time.Hour, monoNow())
	d.pause()
	d.expire() // a fire that raced the pause
	assert.Empty(t, rec.cancelled(), "a paused deadline timed out")
	d.mu.Lock()
	d.timeout = time.Millisecond
	d.mu.Unlock()
	d.reset()
	rec.awaitCancel(t)
	assert.True(t, errors.Is(rec.cancelled()[0], ErrTimeout))
	d.halt()
}

// A call without a time limit, or without a request to cancel, gets a
// deadline no other call shares.
func TestCallDeadlineWithoutLimit(t *testing.T) {
	_, req := newCancelRecorder()
	_, d := callDeadline(context.Background(), req, 0, 0)
	assert.Same(t, untimed, d)
	d.reset()
	d.pause()
	d.stop()

	ctx, d := callDeadline(context.Background(), &downstream.Request{}, time.Hour, 0)
	assert.False(t, d.pooled, "a request the transport cannot cancel gets a context of its own")
	d.stop()
	assert.True(t, errors.Is(context.Cause(ctx), context.Canceled))
}

// BenchmarkCallDeadline is one call's deadline: set, then stopped.
func BenchmarkCallDeadline(b *testing.B) {
	_, req := newCancelRecorder()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, d := callDeadline(ctx, req, time.Minute, 0)
			d.stop()
		}
	})
}
