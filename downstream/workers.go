package downstream

import "time"

// workers runs requests on goroutines that outlive one request: a fresh
// goroutine starts with a small stack and grows it on every request's JSON
// work, which costs more than the request's own bookkeeping. Idle workers
// wait a while for the next request, then exit.
type workers struct{ idle chan func() }

const workerIdle = 30 * time.Second

func (w *workers) run(f func()) {
	select {
	case w.idle <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(workerIdle)
		select {
		case f = <-w.idle:
		case <-t.C:
			return
		}
	}
}
