package downstream

import "time"

// workers runs requests on goroutines that outlive one request: a fresh
// goroutine starts with a small stack and grows it on every request's JSON
// work, which costs more than the request's own bookkeeping. Idle workers
// wait a while for the next request (between workerIdle and twice that),
// then exit.
type workers struct{ idle chan func() }

const workerIdle = 30 * time.Second

func (w *workers) run(f func()) {
	select {
	case w.idle <- f:
	default:
		go w.work(f)
	}
}

// work runs f and then what run hands it, until it waits a whole
// workerIdle with nothing run since the last tick. The timer is reset once
// a tick, not once a request: a reset per request costs a timer operation
// (a lock of the timer heap) on every call's path.
func (w *workers) work(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for ran := true; ; {
		if f != nil {
			f()
			ran = true
		}
		select {
		case f = <-w.idle:
		case <-t.C:
			if !ran {
				return
			}
			ran, f = false, nil
			t.Reset(workerIdle)
		}
	}
}
