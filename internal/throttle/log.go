package throttle

import (
	"sync"
	"time"
)

// Log is one kind of log line under a throttle. Each interval (Every, from
// the first line that opens it) lets the first Burst lines through and
// counts the rest. The count is reported in one of two ways: with Summary
// set, Summary is called with it once the interval is over, whether or not
// another line comes; otherwise Allow returns it with the first line of the
// next interval. A Log is safe for concurrent use; its zero value lets one
// line a second through.
type Log struct {
	Every   time.Duration     // the interval; a second when 0
	Burst   int               // lines let through an interval; 1 when 0
	Summary func(skipped int) // when set, told how many an interval left out
	Now     func() time.Time  // the clock (tests); time.Now when nil

	mu      sync.Mutex
	start   time.Time // of the current interval; zero: none open
	shown   int       // lines let through it
	skipped int       // lines left out, not yet reported
	timer   *time.Timer
}

// Allow reports whether one more line may be logged now and, without
// Summary, how many were left out before it.
func (t *Log) Allow() (ok bool, skipped int) {
	t.mu.Lock()
	now := t.now()
	if t.start.IsZero() || now.Sub(t.start) >= t.every() {
		skipped, t.skipped = t.skipped, 0
		t.start, t.shown = now, 0
		if t.timer != nil {
			t.timer.Stop()
			t.timer = nil
		}
	}
	if t.shown < max(t.Burst, 1) {
		t.shown++
		t.mu.Unlock()
		return true, t.report(skipped)
	}
	t.skipped++
	if t.Summary != nil && t.timer == nil {
		t.timer = time.AfterFunc(t.start.Add(t.every()).Sub(now), t.Flush)
	}
	t.mu.Unlock()
	return false, t.report(skipped)
}

// Flush hands the lines left out so far to Summary, if any were and it is
// set; the end of an interval calls it.
func (t *Log) Flush() {
	t.mu.Lock()
	skipped := 0
	if t.Summary != nil {
		skipped, t.skipped = t.skipped, 0
	}
	t.timer = nil
	t.mu.Unlock()
	t.report(skipped)
}

// report gives Summary a count left out, or returns it when there is no
// Summary; callers do not hold t.mu.
func (t *Log) report(skipped int) int {
	if t.Summary == nil || skipped == 0 {
		return skipped
	}
	t.Summary(skipped)
	return 0
}

func (t *Log) every() time.Duration {
	if t.Every <= 0 {
		return time.Second
	}
	return t.Every
}

func (t *Log) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}
