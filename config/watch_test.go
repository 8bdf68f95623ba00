package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// timing is the watch's timing for a test: files written in place settle
// in 50 ms, and may keep changing for 10 s before that is an error.
func timing(debounce, poll time.Duration) WatchTiming {
	return WatchTiming{Debounce: debounce, Poll: poll, Settle: 50 * time.Millisecond, SettleLimit: 10 * time.Second}
}

// waitSignal waits for the next change from ch, past Pending notices,
// failing after limit or on an error.
func waitSignal(t *testing.T, ch <-chan Change, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(limit)
	for {
		select {
		case c, ok := <-ch:
			require.True(t, ok, "watch channel closed")
			require.NoError(t, c.Err)
			if c.Pending {
				continue
			}
			return time.Since(start)
		case <-deadline:
			t.Fatalf("no change signal within %s", limit)
			return 0
		}
	}
}

// minimalConfig writes a config of its version alone to mcp.yaml in a fresh
// directory and returns the directory and the file.
func minimalConfig(t *testing.T) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\n"), 0o600))
	return dir, path
}

// watchUntilEnd watches paths with timing until the test ends.
func watchUntilEnd(t *testing.T, paths []string, timing WatchTiming) <-chan Change {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := Watch(ctx, paths, timing)
	require.NoError(t, err)
	return ch
}

func TestWatchSeesEditorStyleSaves(t *testing.T) {
	dir, path := minimalConfig(t)
	// A long poll interval proves the events, not the poll, carry the change.
	ch := watchUntilEnd(t, []string{path}, timing(50*time.Millisecond, time.Hour))

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
	_, path := minimalConfig(t)
	// The quiet period is far longer than the burst takes even on a loaded
	// machine: writes closer together than it make one signal.
	const quiet = time.Second
	ch := watchUntilEnd(t, []string{path}, timing(quiet, time.Hour))
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
	_, path := minimalConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := watchWith(ctx, []string{path}, timing(20*time.Millisecond, 50*time.Millisecond), false)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers: {}\n"), 0o600))
	waitSignal(t, ch, 5*time.Second)
}

// configMap lays out dir as Kubernetes mounts a ConfigMap: mcp.yaml is a
// link to ..data/mcp.yaml, and ..data a link to a directory of the data.
// It returns a function that publishes new contents as the kubelet does: a
// new directory, a new link to it renamed over ..data, the old directory
// removed. Each publication's file gets mtime.
func configMap(t *testing.T, dir string, mtime time.Time) (path string, publish func(contents string)) {
	t.Helper()
	n := 0
	publish = func(contents string) {
		n++
		data := fmt.Sprintf("..2026_%02d", n)
		require.NoError(t, os.Mkdir(filepath.Join(dir, data), 0o755))
		file := filepath.Join(dir, data, "mcp.yaml")
		require.NoError(t, os.WriteFile(file, []byte(contents), 0o600))
		require.NoError(t, os.Chtimes(file, mtime, mtime))
		old, _ := os.Readlink(filepath.Join(dir, "..data"))
		require.NoError(t, os.Symlink(data, filepath.Join(dir, "..data_tmp")))
		require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		if old != "" {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, old)))
		}
	}
	publish("version: 1\n#0\n")
	path = filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.Symlink(filepath.Join("..data", "mcp.yaml"), path))
	return path, publish
}

// expectNoSignal fails if ch signals within limit.
func expectNoSignal(t *testing.T, ch <-chan Change, limit time.Duration, why string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal(why)
	case <-time.After(limit):
	}
}

// TestWatchSeesConfigMapSwaps: a ConfigMap update renames a new ..data link
// over the old one; no event names mcp.yaml. The watch must see each swap
// by its events (the poll is an hour away), however many there are, and
// also one to contents of the same size and mtime.
func TestWatchSeesConfigMapSwaps(t *testing.T) {
	dir := t.TempDir()
	mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
	path, publish := configMap(t, dir, mtime)
	ch := watchUntilEnd(t, []string{path}, timing(50*time.Millisecond, time.Hour))
	for i := 1; i <= 3; i++ {
		publish(fmt.Sprintf("version: 1\n#%d\n", i)) // the same size and mtime each time
		waitSignal(t, ch, 5*time.Second)
	}
	// The file the link leads to is watched in its own directory too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "..data", "mcp.yaml"), []byte("version: 1\n#edited\n"), 0o600))
	waitSignal(t, ch, 5*time.Second)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.txt"), []byte("x"), 0o600))
	expectNoSignal(t, ch, 300*time.Millisecond, "a change to another file signalled a reload")
}

// TestWatchPollSeesLinkSwapToLookalike: where no events arrive, the poll
// must see a link swapped for one to a file of the same size and mtime (a
// release unpacked from an archive, say): it is another file.
func TestWatchPollSeesLinkSwapToLookalike(t *testing.T) {
	dir := t.TempDir()
	path, publish := configMap(t, dir, time.Now().Add(-time.Hour).Truncate(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := watchWith(ctx, []string{path}, timing(20*time.Millisecond, 50*time.Millisecond), false)
	require.NoError(t, err)
	publish("version: 1\n#1\n")
	waitSignal(t, ch, 5*time.Second)
}

// TestWatchFollowsSwitchedDirectoryLink: the config is under a "current"
// link to a release directory. The switch to a new release is seen by its
// events, and so is an edit of the new release's file afterwards.
func TestWatchFollowsSwitchedDirectoryLink(t *testing.T) {
	root := t.TempDir()
	for _, r := range []string{"r1", "r2"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, r), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, r, "mcp.yaml"), []byte("version: 1\n#"+r+"\n"), 0o600))
	}
	require.NoError(t, os.Symlink("r1", filepath.Join(root, "current")))
	ch := watchUntilEnd(t, []string{filepath.Join(root, "current", "mcp.yaml")}, timing(50*time.Millisecond, time.Hour))

	require.NoError(t, os.Symlink("r2", filepath.Join(root, "current.tmp")))
	require.NoError(t, os.Rename(filepath.Join(root, "current.tmp"), filepath.Join(root, "current")))
	waitSignal(t, ch, 5*time.Second)
	require.NoError(t, os.WriteFile(filepath.Join(root, "r2", "mcp.yaml"), []byte("version: 1\n#r2 edited\n"), 0o600))
	waitSignal(t, ch, 5*time.Second)
}

// TestWatchDeleteAndRecreateIsOneChange: a tool saves by deleting the file
// and writing it anew half a second later. A deleted config means no
// servers, so signalling the deletion alone would stop every server only
// to start them again: the save is one change, signalled once the file is
// back.
func TestWatchDeleteAndRecreateIsOneChange(t *testing.T) {
	_, path := minimalConfig(t)
	ch := watchUntilEnd(t, []string{path}, timing(50*time.Millisecond, time.Hour))

	require.NoError(t, os.Remove(path))
	select {
	case <-ch:
		t.Fatal("the deletion was signalled before the file had a chance to come back")
	case <-time.After(500 * time.Millisecond): // the tool's pause between delete and write
	}
	require.NoError(t, os.WriteFile(path, []byte("version: 1\n#new\n"), 0o600))
	waitSignal(t, ch, 5*time.Second)
	expectNoSignal(t, ch, deleteGrace+time.Second, "one save signalled twice")
}
