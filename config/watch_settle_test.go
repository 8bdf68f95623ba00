package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoServers is a config whose first part, cut after server a, is a valid
// config of its own: one that stops server b.
const (
	twoServersHead = "version: 1\nservers:\n  a:\n    command: a-server\n"
	twoServersTail = "  b:\n    command: b-server\n"
)

// nextReport returns the watch's next report, failing after limit.
func nextReport(t *testing.T, ch <-chan Change, limit time.Duration) Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		require.True(t, ok, "watch channel closed")
		return c
	case <-time.After(limit):
		t.Fatalf("no report within %s", limit)
		return Change{}
	}
}

// TestWatchInPlaceWriteReportedOnceWhole: a tool truncates the config and
// writes it in two parts, and the first part alone is a valid config. The
// watch looks at the file after the first part (it says so: Pending) and
// only then does the second part come. The change is reported once, after
// the whole file is written, never for the part.
func TestWatchInPlaceWriteReportedOnceWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.yaml")
	whole := twoServersHead + twoServersTail
	require.NoError(t, os.WriteFile(path, []byte(whole), 0o600))
	ws, problems := Load([]string{path}, nil)
	require.NotNil(t, ws, render(problems))
	// The settle period only has to outlast this test's reaction to the
	// Pending report; the events, not the poll, carry the change.
	timing := WatchTiming{Debounce: 20 * time.Millisecond, Poll: time.Hour, Settle: time.Second, SettleLimit: time.Minute}
	ch := watchUntilEnd(t, []string{path}, timing)

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString(twoServersHead)
	require.NoError(t, err)
	ws, problems = Load([]string{path}, nil)
	require.NotNil(t, ws, "the first part must be a valid config on its own: %s", render(problems))
	require.Len(t, ws.Servers, 1)

	first := nextReport(t, ch, 10*time.Second)
	require.NoError(t, first.Err)
	require.True(t, first.Pending, "the half-written file was reported as a change to load")

	_, err = f.WriteString(twoServersTail)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	waitSignal(t, ch, 10*time.Second)
	ws, problems = Load([]string{path}, nil)
	require.NotNil(t, ws, render(problems))
	assert.Len(t, ws.Servers, 2, "the change reported is the whole file")
	expectNoSignal(t, ch, timing.Settle+time.Second, "one write in place was reported more than once")
}

// TestWatchReplacementDoesNotWaitToSettle: a file replaced whole, by rename
// or by a ConfigMap's link swap, cannot be caught half-written: it is
// reported after the debounce, however long the settle period.
func TestWatchReplacementDoesNotWaitToSettle(t *testing.T) {
	timing := WatchTiming{Debounce: 20 * time.Millisecond, Poll: time.Hour, Settle: time.Hour, SettleLimit: 2 * time.Hour}
	t.Run("rename", func(t *testing.T) {
		dir, path := minimalConfig(t)
		ch := watchUntilEnd(t, []string{path}, timing)
		tmp := filepath.Join(dir, ".mcp.yaml.tmp")
		require.NoError(t, os.WriteFile(tmp, []byte("version: 1\n# new\n"), 0o600))
		require.NoError(t, os.Rename(tmp, path))
		c := nextReport(t, ch, 10*time.Second)
		assert.Equal(t, Change{}, c, "a save by rename is a change to load at once")
	})
	t.Run("configmap", func(t *testing.T) {
		path, publish := configMap(t, t.TempDir(), time.Now().Add(-time.Hour).Truncate(time.Second))
		ch := watchUntilEnd(t, []string{path}, timing)
		for i := 1; i <= 2; i++ {
			publish("version: 1\n# swap\n")
			c := nextReport(t, ch, 10*time.Second)
			assert.Equal(t, Change{}, c, "swap %d is a change to load at once", i)
		}
	})
}

// TestWatchReportsFileThatNeverSettles: a file that keeps being written in
// place is reported, once the settle limit has passed, with an error that
// names it, and never as a change to load; once the writing stops, the
// change is reported.
func TestWatchReportsFileThatNeverSettles(t *testing.T) {
	_, path := minimalConfig(t)
	timing := WatchTiming{Debounce: 20 * time.Millisecond, Poll: time.Hour, Settle: 200 * time.Millisecond, SettleLimit: 600 * time.Millisecond}
	ch := watchUntilEnd(t, []string{path}, timing)

	// The writer appends a line every tenth of a settle period until told
	// to stop: the file never stays unchanged for a settle period.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if !assert.NoError(t, err) {
			return
		}
		defer f.Close()
		tick := time.NewTicker(timing.Settle / 10)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, err := f.WriteString("# more\n")
				assert.NoError(t, err)
			}
		}
	}()
	var c Change
	for c = nextReport(t, ch, 10*time.Second); c.Pending; c = nextReport(t, ch, 10*time.Second) {
	}
	close(stop)
	<-stopped
	require.Error(t, c.Err, "a file that never settled was reported as a change to load")
	assert.Contains(t, c.Err.Error(), path)
	assert.Contains(t, c.Err.Error(), "kept changing")
	waitSignal(t, ch, 10*time.Second)
}
