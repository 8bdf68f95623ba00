package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/throttle"
)

// A gateway on a public address is sent requests with bogus credentials by
// anyone; each refusal logged would let them fill the log. Each kind of
// refusal is logged as it comes for the first refusalBurst of an interval
// of refusalEvery; the rest are counted, and one line at the interval's end
// gives the count.
const (
	refusalEvery = 10 * time.Second
	refusalBurst = 5
)

// refusals logs refused requests, throttled per message. A Guard a reload
// builds takes over its predecessor's, so that a reload does not open a
// new interval.
type refusals struct {
	log   *slog.Logger
	mu    sync.Mutex
	kinds map[string]*throttle.Log // by message
}

func newRefusals(log *slog.Logger) *refusals {
	return &refusals{log: log, kinds: map[string]*throttle.Log{}}
}

// note logs a refusal, unless too many of its kind came this interval.
func (r *refusals) note(level slog.Level, msg string, args ...any) {
	r.mu.Lock()
	t := r.kinds[msg]
	if t == nil {
		t = &throttle.Log{Every: refusalEvery, Burst: refusalBurst, Summary: func(n int) {
			r.log.Log(context.Background(), level, msg+"; more like it were not logged", "count", n, "interval", refusalEvery.String())
		}}
		r.kinds[msg] = t
	}
	r.mu.Unlock()
	if ok, _ := t.Allow(); ok {
		r.log.Log(context.Background(), level, msg, args...)
	}
}
