package integration

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// logBuffer collects what a process writes to stderr and lets a test wait until a
// line it expects has been written.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newLogBuffer() *logBuffer {
	return &logBuffer{changed: make(chan struct{})}
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitLine waits until a complete line satisfying match has been written, and returns
// it. It gives up after timeout, or as soon as done is closed (the writer exited), and
// then returns false.
func (b *logBuffer) waitLine(match func(line string) bool, timeout time.Duration, done <-chan struct{}) (string, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	exited := false
	for {
		b.mu.Lock()
		text, changed := b.buf.String(), b.changed
		b.mu.Unlock()
		lines := strings.Split(text, "\n")
		for _, line := range lines[:len(lines)-1] { // the last element is an unfinished line
			if match(line) {
				return line, true
			}
		}
		if exited {
			return "", false
		}
		select {
		case <-changed:
		case <-done:
			exited = true // nothing more will be written; look once more
		case <-deadline.C:
			return "", false
		}
	}
}

// waitLines waits until n complete lines satisfying match have been written, and
// reports whether they were before timeout.
func (b *logBuffer) waitLines(n int, match func(line string) bool, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		text, changed := b.buf.String(), b.changed
		b.mu.Unlock()
		lines := strings.Split(text, "\n")
		found := 0
		for _, line := range lines[:len(lines)-1] { // the last element is an unfinished line
			if match(line) {
				found++
			}
		}
		if found >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// containsLine reports whether a line containing every one of parts has been written.
func (b *logBuffer) containsLine(parts ...string) bool {
	for _, line := range strings.Split(b.String(), "\n") {
		if containsAll(line, parts...) {
			return true
		}
	}
	return false
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
