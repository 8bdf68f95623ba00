//go:build unix

package memtrim

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWhenIdleTrimsOncePerQuietSpell: a trim follows each busy period's
// first quiet one, once, and none follows quiet alone.
func TestWhenIdleTrimsOncePerQuietSpell(t *testing.T) {
	// The CPU time each check reads, in turn: quiet, busy, quiet, quiet,
	// busy, busy, quiet, then quiet for ever.
	used := []time.Duration{0, 1, 100, 101, 102, 300, 500, 501}
	var mu sync.Mutex
	reads, trims := 0, []int{}
	checks := make(chan int, 100)
	cpu := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		i := min(reads, len(used)-1)
		reads++
		checks <- reads
		return used[i] * time.Millisecond
	}
	trim := func() {
		mu.Lock()
		defer mu.Unlock()
		trims = append(trims, reads)
		reads-- // the read after a trim repeats the same value
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { whenIdle(ctx, time.Millisecond, 50*time.Millisecond, cpu, trim); close(done) }()
	for n := range checks {
		if n > 20 {
			break
		}
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, trims, 2, "one trim after each busy spell")
	assert.Equal(t, []int{4, 8}, trims, "after the first quiet check of each spell")
}
