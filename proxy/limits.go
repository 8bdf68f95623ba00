package proxy

import (
	"context"
	"fmt"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/fairshare"
)

// limiter bounds in-flight calls: all of them (limits.max_concurrent),
// shared fairly among clients (--max-calls-per-client), and per tool
// (max_instances). A call over a limit waits, bounded by its ctx.
type limiter struct {
	global *fairshare.Slots // nil = unlimited
	mu     sync.Mutex
	tools  map[string]chan struct{}
}

// newLimiter bounds all calls to maxConcurrent (0: unlimited), of which one
// client holds at most share (0: no share of its own).
func newLimiter(maxConcurrent, share int) *limiter {
	l := &limiter{tools: map[string]chan struct{}{}}
	if maxConcurrent > 0 {
		l.global = fairshare.NewSlots(maxConcurrent, share)
	}
	return l
}

// same reports whether l bounds calls as newLimiter(maxConcurrent, share)
// would.
func (l *limiter) same(maxConcurrent, share int) bool {
	if l.global == nil || maxConcurrent <= 0 {
		return l.global == nil && maxConcurrent <= 0
	}
	return l.global.Size() == maxConcurrent && l.global.Share() == fairshare.NewSlots(maxConcurrent, share).Share()
}

func (l *limiter) toolSlot(key string, max int) chan struct{} {
	if max <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := l.tools[key]
	if ch == nil || cap(ch) != max {
		ch = make(chan struct{}, max)
		l.tools[key] = ch
	}
	return ch
}

// bounds reports whether l bounds a call of a tool with max_instances max:
// without limits.max_concurrent and max_instances a call has nothing to
// acquire.
func (l *limiter) bounds(max int) bool { return l.global != nil || max > 0 }

// acquire takes a global slot for holder (fairshare.Of: who the call
// counts against) and a slot of tool (server/tool, read only when max >
// 0); the hold's release gives both back.
func (l *limiter) acquire(ctx context.Context, holder, tool string, max int) (limitHold, error) {
	if l.global != nil {
		if atShare, err := l.global.Acquire(ctx, holder); err != nil {
			limit := fmt.Sprintf("limits.max_concurrent (%d)", l.global.Size())
			if atShare {
				limit = fmt.Sprintf("%s's share of limits.max_concurrent (%d of %d, --max-calls-per-client)", holder, l.global.Share(), l.global.Size())
			}
			return limitHold{}, &limitError{limit: limit, cause: err}
		}
	}
	hold := limitHold{global: l.global, holder: holder}
	slot := l.toolSlot(tool, max)
	if slot != nil {
		select {
		case slot <- struct{}{}:
			hold.tool = slot
		case <-ctx.Done():
			hold.release()
			return limitHold{}, &limitError{limit: fmt.Sprintf("tool %q: max_instances (%d)", tool, max), cause: context.Cause(ctx)}
		}
	}
	return hold, nil
}

// limitError is a call that got no slot of a limit: the limit (as it reads
// in the config, with its value) had that many calls in flight until the
// call's context ended for cause.
type limitError struct {
	limit string
	cause error
}

func (e *limitError) Error() string {
	return e.limit + " calls already in flight: " + e.cause.Error()
}

func (e *limitError) Unwrap() error { return e.cause }

// limitHold is what one call holds of a limiter.
type limitHold struct {
	global *fairshare.Slots
	holder string
	tool   chan struct{}
}

func (h limitHold) release() {
	if h.tool != nil {
		<-h.tool
	}
	if h.global != nil {
		h.global.Release(h.holder)
	}
}
