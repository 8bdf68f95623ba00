package integration

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReloadStormLeasedServer: the config is rewritten again and again, each edit
// replacing the definition of a leased server, while as many sessions as its
// lease.max_instances keep calling it; limits.max_instances leaves room for one
// definition's instances and a few more. Every call succeeds: the instances of a
// replaced definition that are still finishing their calls and closing do not count
// against the room of the definition that replaced it.
func TestReloadStormLeasedServer(t *testing.T) {
	t.Parallel()
	const (
		edits = 12
		every = 150 * time.Millisecond
	)
	config := func(gen int) string {
		return fmt.Sprintf("version: 1\nlimits: {max_instances: %d}\nservers:\n", defaultLeaseCap+4) +
			leaseBlock("w", "counter", false, fmt.Sprintf(`env: {GEN: "%d"}`, gen))
	}
	r := newReloadRig(t, httpTransport, config(0))
	callers := leaseSessions(t, r.a, defaultLeaseCap)
	defer leaseCloseAll(t, callers)

	var (
		stop  atomic.Bool
		calls atomic.Int64
		mu    sync.Mutex
		fails []error
	)
	var wg sync.WaitGroup
	for i, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, err := leaseTry(c, "w_increment", nil)
				calls.Add(1)
				if err != nil {
					mu.Lock()
					fails = append(fails, fmt.Errorf("session %d: %w", i, err))
					mu.Unlock()
				}
			}
		}()
	}
	for gen := 1; gen <= edits; gen++ {
		r.save(config(gen))
		time.Sleep(every) // the pace of the edits is the test's input, not a wait for an event
	}
	r.save(config(edits + 1))
	r.waitReload() // at least one more reload after the last edit landed
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d calls during %d edits, %d failed", calls.Load(), edits+1, len(fails))
	require.Positive(t, calls.Load())
	if len(fails) > 0 {
		assert.NoError(t, errors.Join(fails[:min(len(fails), 5)]...), "%d of %d calls failed", len(fails), calls.Load())
	}
}
