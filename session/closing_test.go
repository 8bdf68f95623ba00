package session

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// hungFactory stands for a server whose instances never finish starting: each
// start says it began, then waits for its context.
type hungFactory struct {
	began     chan struct{}
	abandoned chan error
}

func newHungFactory() *hungFactory {
	return &hungFactory{began: make(chan struct{}, 16), abandoned: make(chan error, 16)}
}

func (h *hungFactory) start(ctx context.Context) (*upstream.Instance, error) {
	h.began <- struct{}{}
	<-ctx.Done()
	h.abandoned <- ctx.Err()
	return nil, ctx.Err()
}

// closeWithin closes p and fails the test unless Close returns within limit,
// although the context it is given would let it wait far longer.
func closeWithin(t *testing.T, p *Pool, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		p.Close(ctx)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("Close still waits %s later for an instance that is starting", limit)
	}
}

func TestCloseAbandonsASpareThatIsStarting(t *testing.T) {
	h := newHungFactory()
	p := NewPool(Config{Server: "hung", Prewarm: 1}, h.start, nil)
	waitFor(t, h.began, "the spare's start")
	closeWithin(t, p, 5*time.Second)
	assert.ErrorIs(t, waitFor(t, h.abandoned, "the start to be abandoned"), context.Canceled)
	assert.Zero(t, p.ledger.Count(), "the spare's slot is given back")
}

func TestCloseAbandonsASharedRestart(t *testing.T) {
	f := newDemoFactory(t, "tools")
	first := f.first(t)
	h := newHungFactory()
	p := NewPool(Config{Server: "shared", Stateless: true}, h.start, first)
	require.NoError(t, syscall.Kill(first.PID(), syscall.SIGKILL))
	waitFor(t, h.began, "the restart")
	closeWithin(t, p, 5*time.Second)
	assert.ErrorIs(t, waitFor(t, h.abandoned, "the restart to be abandoned"), context.Canceled)
}

func TestCloseAbandonsALeaseThatIsStarting(t *testing.T) {
	h := newHungFactory()
	p := NewPool(Config{Server: "hung"}, h.start, nil)
	got := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background(), named("k"))
		got <- err
	}()
	waitFor(t, h.began, "the lease's start")
	closeWithin(t, p, 5*time.Second)
	assert.ErrorIs(t, waitFor(t, got, "the call to be answered"), ErrClosed)
	assert.Zero(t, p.ledger.Count(), "the lease's slot is given back")
}

// waitFor receives one value from ch within waitTimeout.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("waited %s for %s", waitTimeout, what)
		panic("unreachable")
	}
}

// TestLeaseStartedAsThePoolClosesGivesItsSlotBackOnce: an instance that
// finishes starting for a lease after Close began is closed, and the slot it
// held counts once: the aggregator-wide count of instances returns to zero
// rather than below, which would lift limits.max_instances a little more
// with every server removed while a session's instance started.
func TestLeaseStartedAsThePoolClosesGivesItsSlotBackOnce(t *testing.T) {
	gf := newGatedFactory(newDemoFactory(t, "counter"))
	ledger := NewLedger()
	p := NewPool(Config{Server: "counter", Ledger: ledger}, func(context.Context) (*upstream.Instance, error) {
		// Starts whatever happens to the call's context, as a start past
		// its point of no return does.
		return gf.start(context.Background())
	}, nil)
	got := make(chan error, 1)
	go func() {
		g, err := p.Acquire(context.Background(), named("k"))
		if g != nil {
			g.Done()
		}
		got <- err
	}()
	waitFor(t, gf.entered, "the lease's start")
	require.Equal(t, 1, ledger.Count())
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		p.Close(context.Background())
	}()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.closed
	}, waitTimeout, time.Millisecond)
	close(gf.release)
	inst := waitFor(t, gf.started, "the instance")
	assert.ErrorIs(t, waitFor(t, got, "the call to be answered"), ErrClosed)
	waitFor(t, closed, "Close")
	requireReaped(t, inst.PID())
	assert.Zero(t, ledger.Count(), "slots held across all servers")
}
