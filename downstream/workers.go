package downstream

import (
	"math"
	"sync/atomic"
	"time"
)

// workers runs requests on goroutines that outlive one request: a fresh
// goroutine starts with a small stack and grows it on every request's JSON
// work, which costs more than the request's own bookkeeping. Idle workers
// wait a while for the next request (between workerIdle and twice that),
// then exit.
type workers struct {
	idle chan func() // nil: the worker that takes it exits
	// idleFor is how long a worker waits with nothing run before one
	// idle worker exits; zero means workerIdle.
	idleFor time.Duration
	live    atomic.Int32 // workers running, for tests
}

const workerIdle = 30 * time.Second

func (w *workers) run(f func()) {
	select {
	case w.idle <- f:
	default:
		go w.work(f)
	}
}

// work runs f and then what run hands it, until it is handed nil. A worker
// waits for work with a plain receive: a select with a timer's channel
// would put the timer in the runtime's heap, and take it out, around every
// wait, on every call's path. Its timer instead ticks on its own, every
// idleFor: at a tick with nothing run since the last, it hands nil to an
// idle worker (itself, or another, each as idle as the pool's need of it).
func (w *workers) work(f func()) {
	w.live.Add(1)
	defer w.live.Add(-1)
	period := w.idleFor
	if period <= 0 {
		period = workerIdle
	}
	var ran, exited atomic.Bool
	// Made stopped, so that the function never sees t unset.
	var t *time.Timer
	t = time.AfterFunc(math.MaxInt64, func() {
		if exited.Load() {
			return
		}
		if !ran.Swap(false) {
			select {
			case w.idle <- nil:
			default:
			}
		}
		t.Reset(period)
	})
	t.Reset(period)
	defer func() {
		exited.Store(true)
		t.Stop()
	}()
	for f != nil {
		f()
		ran.Store(true)
		f = <-w.idle
	}
}
