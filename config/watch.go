package config

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reports changes to the given config files on the returned channel,
// debounced: a burst of writes becomes one signal. It watches each file's
// directory, not the file, because editors save by writing a temporary file
// and renaming it over the original, which leaves a watch on the file
// itself blind. A poll of mtime and size every poll interval backs the
// watch up on filesystems where events do not arrive, and for files in a directory
// that cannot be watched. The channel holds at
// most one pending signal; it is closed when ctx ends.
func Watch(ctx context.Context, paths []string, debounce, poll time.Duration) (<-chan struct{}, error) {
	return watchWith(ctx, paths, debounce, poll, true)
}

// watchWith is Watch with the event watch optional, so the poll can be tested alone.
func watchWith(ctx context.Context, paths []string, debounce, poll time.Duration, events bool) (<-chan struct{}, error) {
	files := map[string]bool{}
	dirs := map[string]bool{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", p, err)
		}
		files[abs] = true
		dirs[filepath.Dir(abs)] = true
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	for d := range dirs {
		if !events {
			break
		}
		// A directory that cannot be watched (one that does not exist yet,
		// say) is left to the poll, which sees its files appear.
		_ = w.Add(d)
	}
	out := make(chan struct{}, 1)
	last := snapshot(files) // before returning, so no change can slip between
	go func() {
		defer close(out)
		defer w.Close()
		ticker := time.NewTicker(poll)
		defer ticker.Stop()
		var fire <-chan time.Time
		var timer *time.Timer
		arm := func() {
			if timer == nil {
				timer = time.NewTimer(debounce)
			} else {
				timer.Reset(debounce)
			}
			fire = timer.C
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if files[filepath.Clean(ev.Name)] {
					arm()
				}
			case <-w.Errors:
				// A lost event is caught by the poll below.
			case <-ticker.C:
				// A pending signal will cover this change; re-arming would
				// only push it back.
				if fire == nil && snapshot(files) != last {
					arm()
				}
			case <-fire:
				fire = nil
				last = snapshot(files)
				select {
				case out <- struct{}{}:
				default: // a signal is already pending; it covers this change
				}
			}
		}
	}()
	return out, nil
}

// snapshot summarizes the files' existence, mtime and size, in the order of their
// names, so that unchanged files give the same summary every time.
func snapshot(files map[string]bool) string {
	s := ""
	for _, f := range slices.Sorted(maps.Keys(files)) {
		if st, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%s|%d|%d;", f, st.ModTime().UnixNano(), st.Size())
		} else {
			s += f + "|-;"
		}
	}
	return s
}
