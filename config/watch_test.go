package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitSignal waits for one signal from ch, failing after limit.
func waitSignal(t *testing.T, ch <-chan struct{}, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case _, ok := <-ch:
		require.True(t, ok, "watch channel closed")
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("no change signal within %s", limit)
		return 0
	}
}

func TestWatchSeesEditorStyleSaves(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A long poll interval proves the events, not the poll, carry the change.
	ch, err := Watch(ctx, []string{path}, 50*time.Millisecond, time.Hour)
	require.NoError(t, err)

	// 1. In-place write.
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: {}\n"), 0o600))
	waitSignal(t, ch, 5*time.Second)

	// 2. Save by rename, as editors do; the watch must survive it.
	for i := 0; i < 2; i++ {
		tmp := filepath.Join(dir, ".mcp.yaml.swp")
		require.NoError(t, os.WriteFile(tmp, []byte("version: 1\n# edit\n"), 0o600))
		require.NoError(t, os.Rename(tmp, path))
		waitSignal(t, ch, 5*time.Second)
	}

	// 3. Deletion is a change too.
	require.NoError(t, os.Remove(path))
	waitSignal(t, ch, 5*time.Second)

	// Other files in the directory are not.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.txt"), []byte("x"), 0o600))
	select {
	case <-ch:
		t.Fatal("a change to another file signalled a reload")
	case <-time.After(300 * time.Millisecond):
	}
}

func TestWatchBurstIsOneSignal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The quiet period is far longer than the burst takes even on a loaded
	// machine: writes closer together than it make one signal.
	const quiet = time.Second
	ch, err := Watch(ctx, []string{path}, quiet, time.Hour)
	require.NoError(t, err)
	last := time.Now()
	for i := 0; i < 10; i++ {
		require.NoError(t, os.WriteFile(path, []byte("version: 1\n#"+string(rune('a'+i))+"\n"), 0o600))
		require.Less(t, time.Since(last), quiet/2, "the burst itself was not one: two writes came %s apart", time.Since(last))
		last = time.Now()
	}
	waitSignal(t, ch, 5*time.Second)
	select {
	case <-ch:
		t.Fatal("a burst of writes produced more than one signal")
	case <-time.After(quiet + quiet/2): // a second signal would come a quiet period after the last event
	}
}

func TestWatchPollFallback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := watchWith(ctx, []string{path}, 20*time.Millisecond, 50*time.Millisecond, false)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: {}\n"), 0o600))
	waitSignal(t, ch, 5*time.Second)
}
