package fairshare

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// acquired starts an Acquire of holder and returns a channel that receives
// its error once it returns.
func acquired(s *Slots, ctx context.Context, holder string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, holder)
		done <- err
	}()
	return done
}

// waitingFor blocks until n pieces of work wait.
func waitingFor(t *testing.T, s *Slots, n int) {
	t.Helper()
	for {
		s.mu.Lock()
		w := len(s.waiting)
		s.mu.Unlock()
		if w == n {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("never %d waiting", n)
		default:
			runtime.Gosched()
		}
	}
}

func TestSlotsShareLeavesRoomForAnotherHolder(t *testing.T) {
	s := NewSlots(4, 2)
	ctx := t.Context()
	for range 2 {
		_, err := s.Acquire(ctx, "a")
		require.NoError(t, err)
	}
	// a is at its share: its next call waits though two slots are free.
	third := acquired(s, ctx, "a")
	waitingFor(t, s, 1)
	_, err := s.Acquire(ctx, "b")
	require.NoError(t, err, "another holder takes a free slot at once")
	assert.Equal(t, 1, s.Held("b"))

	s.Release("a")
	require.NoError(t, <-third, "a freed slot of its own lets a's waiting call in")
	assert.Equal(t, 2, s.Held("a"))
}

func TestSlotsFreedSlotGoesToTheHolderWithFewest(t *testing.T) {
	s := NewSlots(2, 0) // no share: only the order is fair
	ctx := t.Context()
	for range 2 {
		_, err := s.Acquire(ctx, "a")
		require.NoError(t, err)
	}
	aWaits := acquired(s, ctx, "a")
	waitingFor(t, s, 1)
	bWaits := acquired(s, ctx, "b")
	waitingFor(t, s, 2)

	s.Release("a")
	require.NoError(t, <-bWaits, "b holds none: it goes before a's older call")
	select {
	case err := <-aWaits:
		t.Fatalf("a's call got a slot none was free for: %v", err)
	default:
	}
	s.Release("a")
	require.NoError(t, <-aWaits)
}

func TestSlotsWaitEndsWithItsContext(t *testing.T) {
	s := NewSlots(1, 0)
	_, err := s.Acquire(t.Context(), "a")
	require.NoError(t, err)
	stop := errors.New("gave up")
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan bool, 1)
	go func() {
		atShare, err := s.Acquire(ctx, "a")
		assert.ErrorIs(t, err, stop)
		done <- atShare
	}()
	waitingFor(t, s, 1)
	cancel(stop)
	assert.False(t, <-done, "no share: the wait was for any slot")
	waitingFor(t, s, 0)
	s.Release("a")
	_, err = s.Acquire(t.Context(), "b")
	require.NoError(t, err, "the abandoned wait took nothing")

	shared := NewSlots(4, 1)
	_, err = shared.Acquire(t.Context(), "a")
	require.NoError(t, err)
	gone, leave := context.WithCancel(t.Context())
	leave()
	atShare, err := shared.Acquire(gone, "a")
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, atShare, "the wait was for a's own slot")
}

func TestSlotsUnnamedHolderHasNoShare(t *testing.T) {
	s := NewSlots(3, 1)
	for range 3 {
		_, err := s.Acquire(t.Context(), "")
		require.NoError(t, err)
	}
	assert.Equal(t, 3, s.Held(""))
	assert.Equal(t, 0, NewSlots(3, 3).Share(), "a share of every slot is none")
}
