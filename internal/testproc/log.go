package testproc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// LogRecorder is a slog handler that keeps every record as one line of text
// ("LEVEL message key=value ..."), so that a test can wait for what the code
// under test logged.
type LogRecorder struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

// NewLogRecorder returns an empty recorder.
func NewLogRecorder() *LogRecorder { return &LogRecorder{changed: make(chan struct{})} }

// Logger returns a logger that writes to r.
func (r *LogRecorder) Logger() *slog.Logger { return slog.New(r) }

// Enabled records every level.
func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps rec as a line and wakes the waiters.
func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return nil
}

// WithAttrs returns r: the recorded lines carry only a record's own attributes.
func (r *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup returns r: groups are not recorded.
func (r *LogRecorder) WithGroup(string) slog.Handler { return r }

// Lines returns a copy of the lines recorded so far, oldest first.
func (r *LogRecorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Has reports whether a line recorded so far contains substr.
func (r *LogRecorder) Has(substr string) bool {
	for _, l := range r.Lines() {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// WaitFor returns the first recorded line that contains substr, waiting up
// to WaitTimeout for it and failing the test without it.
func (r *LogRecorder) WaitFor(t *testing.T, substr string) string {
	t.Helper()
	deadline := time.After(WaitTimeout)
	for {
		r.mu.Lock()
		changed := r.changed
		for _, l := range r.lines {
			if strings.Contains(l, substr) {
				r.mu.Unlock()
				return l
			}
		}
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no log line containing %q within %s", substr, WaitTimeout)
		}
	}
}
