package upstream

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/internal/throttle"
)

// An upstream decides how many messages it sends; the work each one causes
// must not grow with that number. The types below keep it bounded: a
// coalescer folds a flood of triggers into at most one run under way and
// one pending, slots cap how much runs at once and refuse the rest, and a
// throttledLog keeps a flood from becoming a flood of log lines.

// coalescer runs fn on a goroutine of its own each time it is triggered,
// with at most one run under way and at most one pending: triggers that
// arrive during a run are folded into exactly one more run after it. So the
// last trigger is always followed by a run that starts after it, and a flood
// of triggers costs two runs, not one per trigger.
type coalescer struct {
	fn      func()
	mu      sync.Mutex
	running bool // a goroutine is in run
	again   bool // a trigger arrived after the current run started
}

func newCoalescer(fn func()) *coalescer { return &coalescer{fn: fn} }

// trigger asks for a run. It never blocks and never starts a second goroutine
// while one is running.
func (c *coalescer) trigger() {
	c.mu.Lock()
	if c.running {
		c.again = true
		c.mu.Unlock()
		return
	}
	c.running = true
	c.mu.Unlock()
	go c.run()
}

func (c *coalescer) run() {
	for {
		c.fn()
		c.mu.Lock()
		if !c.again {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.again = false
		c.mu.Unlock()
	}
}

// slots is a counting semaphore that never waits: what finds a free slot
// runs, the rest is refused at once.
type slots chan struct{}

func newSlots(n int) slots { return make(slots, n) }

// take reports whether a slot was free; the caller then owns it until release.
func (s slots) take() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s slots) release() { <-s }

// throttledLog logs one kind of warning at most once a second (or once
// every Every), saying how many were left out since the last one.
type throttledLog struct{ throttle.Log }

func (t *throttledLog) warn(log *slog.Logger, msg string, args ...any) {
	ok, skipped := t.Allow()
	if !ok {
		return
	}
	if skipped > 0 {
		args = append(args, "suppressed", skipped)
	}
	log.Warn(msg, args...)
}

// cancelNotice tells an upstream, through notify, that request id was given
// up, off the caller's path and with its own time limit, so that the caller
// returns at its deadline even when the upstream does not read. A notice is
// advisory: with every slot of notices taken, the upstream is not keeping up
// anyway, and none is sent.
// cancelReason is the reason a cancellation gives the upstream: the one the
// client gave when it cancelled (a cause with CancelReason), else why.
func cancelReason(why error) string {
	var client interface{ CancelReason() string }
	if errors.As(why, &client) {
		return client.CancelReason()
	}
	return why.Error()
}

func cancelNotice(notices slots, life context.Context, notify func(context.Context, string, any) error, id int64, why error) {
	if !notices.take() {
		return
	}
	go func() {
		defer notices.release()
		ctx, cancel := context.WithTimeout(life, noticeTimeout)
		defer cancel()
		_ = notify(ctx, "notifications/cancelled", cancelledParams{RequestID: id, Reason: cancelReason(why)})
	}()
}
