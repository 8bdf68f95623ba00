package downstream

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// lineQueue is one stream's ordered queue of outgoing messages, written by
// one goroutine at a time. Responses are never dropped (their number is
// bounded by the caller's in-flight slots); other messages are dropped past
// the limit.
//
// Whoever holds the writing role writes everything queued, in order, until
// the queue is empty. The drain loop takes the role for what push queues;
// the worker that finished a request takes it for its response
// (pushWrite) when no one else writes, which spares a response the wait
// for the drain loop to be scheduled. Anything queued while the role is
// held is written by its holder before it lets go.
type lineQueue struct {
	mu      sync.Mutex
	queue   []queuedLine
	notes   int // droppable messages queued
	limit   int
	dropped int
	closed  bool
	writing bool  // the role is held
	err     error // the write that failed; nothing more is written
	wake    chan struct{}
	flushed chan struct{} // signalled each time the queue is found empty

	// The role holder's.
	bw    *bufio.Writer
	done  func(response bool) // told of each message written
	spare []queuedLine
}

type queuedLine struct {
	data     []byte
	response bool
}

// newLineQueue returns a queue writing to w, one message per line.
func newLineQueue(limit int, w io.Writer, done func(response bool)) *lineQueue {
	return &lineQueue{limit: limit, wake: make(chan struct{}, 1), flushed: make(chan struct{}, 1),
		bw: bufio.NewWriterSize(w, 64<<10), done: done}
}

// push queues data for the drain loop; it never blocks.
func (o *lineQueue) push(data []byte, response bool) bool {
	if !o.add(data, response) {
		return false
	}
	o.signal()
	return true
}

// pushWrite queues a response and, when no one is writing, writes the
// queue itself, on the caller's goroutine. Only a goroutine that may block
// on the client calls it: a request's worker, never an upstream's reader.
func (o *lineQueue) pushWrite(data []byte) bool {
	if !o.add(data, true) {
		return false
	}
	o.mu.Lock()
	mine := !o.writing && o.err == nil
	o.writing = o.writing || mine
	o.mu.Unlock()
	if mine {
		o.write()
	}
	return true
}

func (o *lineQueue) add(data []byte, response bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || (!response && o.notes >= o.limit) {
		if !o.closed {
			o.dropped++
		}
		return false
	}
	o.queue = append(o.queue, queuedLine{data: data, response: response})
	if !response {
		o.notes++
	}
	return true
}

func (o *lineQueue) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *lineQueue) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

// drain is the drain loop: it writes what push queues until the queue is
// closed and empty or a write fails, whoever made it fail.
func (o *lineQueue) drain() error {
	for {
		o.mu.Lock()
		switch {
		case o.err != nil:
			err := o.err
			o.mu.Unlock()
			return err
		case o.writing: // its holder writes what is queued
			o.mu.Unlock()
		case len(o.queue) > 0:
			o.writing = true
			o.mu.Unlock()
			o.write()
			continue
		case o.closed:
			o.mu.Unlock()
			return nil
		default:
			o.mu.Unlock()
		}
		<-o.wake
	}
}

// write writes the queue until it is empty, then gives up the role; the
// caller holds it.
func (o *lineQueue) write() {
	for {
		o.mu.Lock()
		batch := o.queue
		o.queue, o.spare = o.spare[:0], nil
		o.notes = 0
		if len(batch) == 0 {
			o.writing, o.spare = false, batch
			closed := o.closed
			o.mu.Unlock()
			select {
			case o.flushed <- struct{}{}:
			default:
			}
			if closed {
				o.signal() // the drain loop ends once no one writes
			}
			return
		}
		o.mu.Unlock()
		var err error
		for _, m := range batch {
			o.bw.Write(m.data)
			err = o.bw.WriteByte('\n')
		}
		if err == nil {
			err = o.bw.Flush()
		}
		if err != nil {
			o.mu.Lock()
			o.err, o.writing = err, false
			o.mu.Unlock()
			o.signal() // the drain loop reports it
			return
		}
		// A response's slot frees once it is on the wire, not in a buffer.
		for i, m := range batch {
			o.done(m.response)
			batch[i] = queuedLine{}
		}
		o.mu.Lock()
		o.spare = batch[:0]
		o.mu.Unlock()
	}
}

// flushWait waits until the writer found the queue empty, up to limit.
func (o *lineQueue) flushWait(limit time.Duration) {
	select {
	case <-o.flushed: // drop a stale signal
	default:
	}
	o.mu.Lock()
	empty := len(o.queue) == 0 && !o.writing
	o.mu.Unlock()
	if empty {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-o.flushed:
	case <-t.C:
	}
}
