package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDrainWaitsWhileShortCallsGoOn: a draining replica whose session keeps making
// short calls, each over in a few milliseconds with a pause far under a second before
// the next, serves every one of them and exits only after the last, once no call has
// run for a second. The session spends most of its time between calls: a replica that
// looked at its in-flight count every 50ms would mostly see none, and exit under it.
func TestDrainWaitsWhileShortCallsGoOn(t *testing.T) {
	t.Parallel()
	const (
		calls = 40
		pause = 150 * time.Millisecond // the client's pace, its input: far under the quiet second
	)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, replicaConfig())}})
	a.waitLoaded()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &rsession{url: a.url}
	require.NoError(t, s.open(ctx))

	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= calls; i++ {
			r, err := s.call(ctx, "c_increment", nil, nil)
			if err == nil && (r.Value == nil || *r.Value != i) {
				err = fmt.Errorf("gave %s, want %d", r.Raw, i)
			}
			if err != nil {
				done <- fmt.Errorf("call %d of %d: %w", i, calls, err)
				return
			}
			if i == 5 {
				close(started)
			}
			time.Sleep(pause)
		}
		done <- nil
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the calls failed before the drain: %v", err)
	}
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	_, ok := a.log.waitLine(func(l string) bool { return strings.Contains(l, "msg=draining") }, startTimeout, a.exited)
	require.True(t, ok, "no drain began:\n%s", a.log)

	select {
	case err := <-done:
		require.NoError(t, err, "a call during the drain failed")
	case <-a.exited:
		t.Fatalf("the replica exited while its session was still calling:\n%s", a.log)
	}
	select {
	case <-a.exited:
		t.Fatalf("the replica exited before the last answer:\n%s", a.log)
	default:
	}
	waitExit(t, a)
	assert.True(t, a.log.containsLine("drained: no call in flight"), "%s", a.log)
}
