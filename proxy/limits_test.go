package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tryAcquire acquires with a short deadline.
func tryAcquire(l *limiter, tool string, max int) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	hold, err := l.acquire(ctx, "", tool, max)
	return hold.release, err
}

func TestLimiterGlobalCap(t *testing.T) {
	l := newLimiter(2, 0)
	r1, err := tryAcquire(l, "s/a", 0)
	require.NoError(t, err)
	r2, err := tryAcquire(l, "s/b", 0)
	require.NoError(t, err)

	began := time.Now()
	_, err = tryAcquire(l, "s/c", 0)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "limits.max_concurrent (2)")
	assert.Less(t, time.Since(began), 5*time.Second, "the wait is bounded by ctx")

	r1()
	r3, err := tryAcquire(l, "s/c", 0)
	require.NoError(t, err, "a released slot is reusable")
	r2()
	r3()

	// A waiter gets in as soon as a slot frees.
	hold, err := tryAcquire(l, "s/a", 0)
	require.NoError(t, err)
	hold2, err := tryAcquire(l, "s/a", 0)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		hold, err := l.acquire(ctx, "", "s/b", 0)
		if err == nil {
			hold.release()
		}
		got <- err
	}()
	hold()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter never got the freed slot")
	}
	hold2()
}

func TestLimiterPerToolCap(t *testing.T) {
	l := newLimiter(0, 0)
	r1, err := tryAcquire(l, "srv/slow", 1)
	require.NoError(t, err)

	_, err = tryAcquire(l, "srv/slow", 1)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `tool "srv/slow"`)
	assert.Contains(t, err.Error(), "max_instances (1)")

	other, err := tryAcquire(l, "srv/other", 1)
	require.NoError(t, err, "the cap is per tool")
	other()
	unlimited, err := tryAcquire(l, "srv/slow", 0)
	require.NoError(t, err, "no per-tool cap when max is 0")
	unlimited()

	r1()
	r2, err := tryAcquire(l, "srv/slow", 1)
	require.NoError(t, err)
	r2()
}

func TestLimiterReturnsTheGlobalSlotWhenTheToolIsFull(t *testing.T) {
	l := newLimiter(2, 0)
	held, err := tryAcquire(l, "s/one", 1)
	require.NoError(t, err)
	for range 3 {
		_, err := tryAcquire(l, "s/one", 1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "max_instances")
	}
	// Had the failed attempts kept their global slots, this would block.
	other, err := tryAcquire(l, "s/two", 0)
	require.NoError(t, err)
	other()
	held()
}

func TestLimiterUnlimited(t *testing.T) {
	l := newLimiter(0, 0)
	var releases []func()
	for range 100 {
		r, err := tryAcquire(l, "s/t", 0)
		require.NoError(t, err)
		releases = append(releases, r)
	}
	for _, r := range releases {
		r()
	}
}

// One client at its share of limits.max_concurrent waits for one of its
// own calls, while another client's call takes a free slot at once; a
// call that times out at its share is told so.
func TestLimiterClientShare(t *testing.T) {
	l := newLimiter(4, 2)
	var held []func()
	for range 2 {
		hold, err := l.acquire(t.Context(), `client "a"`, "", 0)
		require.NoError(t, err)
		held = append(held, hold.release)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := l.acquire(ctx, `client "a"`, "", 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `client "a"'s share of limits.max_concurrent (2 of 4, --max-calls-per-client)`)

	hold, err := l.acquire(t.Context(), `client "b"`, "", 0)
	require.NoError(t, err, "another client takes a free slot at once")
	hold.release()
	for _, release := range held {
		release()
	}

	assert.True(t, l.same(4, 2))
	assert.True(t, newLimiter(4, 0).same(4, 4), "a share of every slot is none")
	assert.False(t, l.same(4, 3))
	assert.False(t, l.same(8, 2))
	assert.True(t, newLimiter(0, 0).same(0, 5))
}
