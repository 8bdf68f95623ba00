package oauth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reports changes to the stored grants on the returned channel, so
// that a running aggregator takes up a login without a restart. It watches
// the directory (created, mode 0700, if missing), since grants are saved by
// renaming a temporary file over the old one, and polls it every poll as
// well, for filesystems that deliver no events. Bursts become one signal
// after debounce; the channel holds at most one pending signal and is
// closed when ctx ends.
func (s *Store) Watch(ctx context.Context, debounce, poll time.Duration) (<-chan struct{}, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s for OAuth tokens: %w", s.dir, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", s.dir, err)
	}
	if err := w.Add(s.dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watch %s: %w", s.dir, err)
	}
	out := make(chan struct{}, 1)
	last := s.snapshot()
	go func() {
		defer close(out)
		defer w.Close()
		ticker := time.NewTicker(poll)
		defer ticker.Stop()
		timer := time.NewTimer(debounce)
		timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if isGrantFile(filepath.Base(ev.Name)) {
					timer.Reset(debounce)
				}
			case <-w.Errors:
				// A lost event is caught by the poll.
			case <-ticker.C:
				if now := s.snapshot(); now != last {
					last = now
					timer.Reset(debounce)
				}
			case <-timer.C:
				last = s.snapshot()
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}

// snapshot sums up the grant files' names, sizes and times.
func (s *Store) snapshot() string {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return "unreadable"
	}
	var b []byte
	for _, e := range entries {
		if !isGrantFile(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		b = fmt.Appendf(b, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return string(b)
}
