package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Concurrency rule: nothing waits to write to an upstream on a downstream
// reader goroutine (a call Start sends writes only what the pipe takes at
// once), and every write to an upstream has a deadline. A client
// notification runs on the goroutine that reads the client's connection
// (over stdio, the only one): a write there to an upstream that stopped
// reading its stdin would stop every other message of that client. So the
// notifications a client causes upstream are queued here, per instance,
// and written off that goroutine, each bounded by noteTimeout.

// noteTimeout bounds the write of one notification to an upstream. An
// upstream that takes no more within it misses that notification; the
// ones after it are still tried.
const noteTimeout = 5 * time.Second

// maxQueuedNotes bounds the notifications waiting for one instance. Those
// beyond it are dropped: an instance that far behind is not reading.
const maxQueuedNotes = 64

// upstreamNotes sends notifications to upstream instances in the order
// they were queued for each instance, one writer goroutine per instance
// with something to send (it ends once the queue is empty). A notification
// equal to the one queued last is not queued again: a second
// notifications/roots/list_changed behind one not yet sent tells the
// upstream nothing more.
type upstreamNotes struct {
	mu     sync.Mutex
	queues map[*upstream.Instance]*noteQueue
}

// noteQueue is what waits to be written to one instance, oldest first.
type noteQueue struct {
	methods []string
}

// send queues the notification method (without params) for inst, and
// returns at once. life bounds every write, as noteTimeout does each.
func (u *upstreamNotes) send(life context.Context, log *slog.Logger, inst *upstream.Instance, method string) {
	u.mu.Lock()
	if q := u.queues[inst]; q != nil {
		// A writer is running: it takes this in turn.
		switch n := len(q.methods); {
		case n > 0 && q.methods[n-1] == method:
		case n >= maxQueuedNotes:
			log.Debug("an upstream is not taking notifications; one was dropped", "server", inst.Server(), "method", method)
		default:
			q.methods = append(q.methods, method)
		}
		u.mu.Unlock()
		return
	}
	if u.queues == nil {
		u.queues = map[*upstream.Instance]*noteQueue{}
	}
	q := &noteQueue{methods: []string{method}}
	u.queues[inst] = q
	u.mu.Unlock()
	go u.write(life, log, inst, q)
}

// write sends q's notifications to inst until q is empty, then forgets q.
func (u *upstreamNotes) write(life context.Context, log *slog.Logger, inst *upstream.Instance, q *noteQueue) {
	for {
		u.mu.Lock()
		if len(q.methods) == 0 {
			delete(u.queues, inst)
			u.mu.Unlock()
			return
		}
		method := q.methods[0]
		q.methods = q.methods[1:]
		u.mu.Unlock()
		ctx, cancel := context.WithTimeout(life, noteTimeout)
		err := inst.Notify(ctx, method, nil)
		cancel()
		if err != nil {
			log.Debug("a notification did not reach an upstream", "server", inst.Server(), "method", method, "err", err)
		}
	}
}
