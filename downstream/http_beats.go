package downstream

import (
	"context"
	"sync"
	"time"
)

// beats turns the response of every request still running one heartbeat
// interval after it began into a stream, with a heartbeat
// (streamWriter.start): one goroutine and one timer for all the requests
// of the transport, where a timer of its own cost every request a timer
// to set and one to stop.
//
// The requests wait in a list in the order they began, which is the order
// they fall due. The goroutine sleeps until the first is due, starts what
// is due, and sleeps again; it exits once none waits (or the transport's
// context ends), and the next request starts it again.
type beats struct {
	interval time.Duration
	life     context.Context // the transport's: the goroutine ends with it

	mu         sync.Mutex
	head, tail *beat // the waiting requests, oldest first
	running    bool  // the goroutine runs
}

// beat is one request's place in the list, made with its post.
type beat struct {
	prev, next *beat
	due        time.Time
	w          *streamWriter
	waiting    bool // in the list
}

// add puts w's request in the list, due one interval from now.
func (bs *beats) add(b *beat, w *streamWriter) {
	b.w, b.due = w, time.Now().Add(bs.interval)
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b.prev, b.next, b.waiting = bs.tail, nil, true
	if bs.tail != nil {
		bs.tail.next = b
	} else {
		bs.head = b
	}
	bs.tail = b
	if !bs.running {
		bs.running = true
		go bs.run()
	}
}

// remove takes b's request out of the list, if it is still there.
func (bs *beats) remove(b *beat) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b.waiting {
		bs.unlink(b)
	}
}

func (bs *beats) unlink(b *beat) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		bs.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		bs.tail = b.prev
	}
	b.prev, b.next, b.waiting = nil, nil, false
}

// run starts the streams of the requests as they fall due, until none
// waits.
func (bs *beats) run() {
	timer := time.NewTimer(bs.interval)
	defer timer.Stop()
	var due []*streamWriter
	for {
		bs.mu.Lock()
		now := time.Now()
		for bs.head != nil && !bs.head.due.After(now) {
			due = append(due, bs.head.w)
			bs.unlink(bs.head)
		}
		idle := bs.head == nil
		var wait time.Duration
		if idle {
			bs.running = false
		} else {
			wait = bs.head.due.Sub(now)
		}
		bs.mu.Unlock()
		for i, w := range due {
			w.start(true) // a no-op once its request finished
			due[i] = nil
		}
		due = due[:0]
		if idle {
			return
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-bs.life.Done():
			bs.mu.Lock()
			bs.running = false
			bs.mu.Unlock()
			return
		}
	}
}
