package proxy

import (
	"context"
	"fmt"
	"sync"
)

// limiter bounds in-flight calls: all of them (limits.max_concurrent) and
// per tool (max_instances). A call over a limit waits, bounded by its ctx.
type limiter struct {
	global chan struct{} // nil = unlimited
	mu     sync.Mutex
	tools  map[string]chan struct{}
}

func newLimiter(maxConcurrent int) *limiter {
	l := &limiter{tools: map[string]chan struct{}{}}
	if maxConcurrent > 0 {
		l.global = make(chan struct{}, maxConcurrent)
	}
	return l
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

// acquire takes a global slot and a slot of tool (server/tool, read only
// when max > 0); the hold's release gives both back.
func (l *limiter) acquire(ctx context.Context, tool string, max int) (limitHold, error) {
	if l.global != nil {
		select {
		case l.global <- struct{}{}:
		case <-ctx.Done():
			return limitHold{}, &limitError{limit: fmt.Sprintf("limits.max_concurrent (%d)", cap(l.global)), cause: context.Cause(ctx)}
		}
	}
	slot := l.toolSlot(tool, max)
	if slot != nil {
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			if l.global != nil {
				<-l.global
			}
			return limitHold{}, &limitError{limit: fmt.Sprintf("tool %q: max_instances (%d)", tool, max), cause: context.Cause(ctx)}
		}
	}
	return limitHold{global: l.global, tool: slot}, nil
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
type limitHold struct{ global, tool chan struct{} }

func (h limitHold) release() {
	if h.tool != nil {
		<-h.tool
	}
	if h.global != nil {
		<-h.global
	}
}
