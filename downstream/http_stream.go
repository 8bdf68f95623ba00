package downstream

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// outbox is the bounded queue between the goroutines that produce messages
// for one response (Request.Send, Request.Ask, Session.Notify) and that
// response's only writer. Offering never blocks. Once close returns, no
// offer succeeds, so a writer that drains the queue after closing it has
// every message that was accepted. The queue grows as messages come: most
// responses carry none, and pay for none.
//
// A POST's queue (post.out) is used in place from its zero value, with its
// limit and writer set (serveRequest): it makes no channel until its writer starts
// (streamWriter.start), and has no done, which only a GET stream's writer
// waits on.
type outbox struct {
	// wake holds a signal while messages may be waiting; a POST's is made
	// when its writer starts.
	wake chan struct{}
	done chan struct{} // closed once the writer takes no more messages; nil for a POST's
	// closeWhenFull ends the stream on overflow instead of dropping the one
	// message: a GET stream that silently lost a notification would look
	// healthy, while a closed one makes the client reconnect.
	closeWhenFull bool

	mu     sync.Mutex // orders offers against close; never held across a write
	closed bool
	msgs   []*jsonrpc.Message // waiting, from head on
	head   int
	limit  int
	bytes  int // queuedSize of the waiting messages
	// writer, when set, is started (without mu) after a message is queued,
	// to make sure it is running.
	writer *streamWriter
}

// maxQueuedBytes bounds the messages waiting on one stream in bytes, as the
// queue size bounds them in number: an upstream's messages may each be tens
// of MiB, and a client that stops reading must not make the gateway hold a
// queue of them. One message alone is taken whatever its size, so that any
// message an upstream may send can go out.
const maxQueuedBytes = 16 << 20

// queuedSize is about what m takes in a queue: its raw members.
func queuedSize(m *jsonrpc.Message) int {
	n := len(m.ID) + len(m.Method) + len(m.Params) + len(m.Result)
	if m.Error != nil {
		n += len(m.Error.Message) + len(m.Error.Data)
	}
	return n
}

func newOutbox(size int, closeWhenFull bool) *outbox {
	return &outbox{wake: make(chan struct{}, 1), done: make(chan struct{}), closeWhenFull: closeWhenFull, limit: size}
}

// offer queues m unless the writer is gone or the queue is full.
func (q *outbox) offer(m *jsonrpc.Message) bool {
	if !q.queue(m) {
		return false
	}
	if q.writer != nil {
		q.writer.start(false)
	}
	return true
}

// wakeWriter makes the channel that wakes the writer of a POST's queue,
// holding a signal for what was queued before; the writer starts after it.
func (q *outbox) wakeWriter() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wake = make(chan struct{}, 1)
	q.wake <- struct{}{}
}

func (q *outbox) queue(m *jsonrpc.Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	size := queuedSize(m)
	if waiting := len(q.msgs) - q.head; waiting >= q.limit || (waiting > 0 && q.bytes+size > maxQueuedBytes) {
		if q.closeWhenFull {
			q.closeLocked()
		}
		return false
	}
	q.msgs = append(q.msgs, m)
	q.bytes += size
	if q.wake != nil { // else no writer started yet: it starts with a signal
		select {
		case q.wake <- struct{}{}:
		default: // a signal is already waiting
		}
	}
	return true
}

// take returns the oldest waiting message, or nil when none waits. Only
// the writer takes.
func (q *outbox) take() *jsonrpc.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.msgs) {
		return nil
	}
	m := q.msgs[q.head]
	q.msgs[q.head] = nil
	q.bytes -= queuedSize(m)
	if q.head++; q.head == len(q.msgs) {
		q.msgs, q.head = q.msgs[:0], 0
	}
	return m
}

// close stops the queue; messages still in it are left to the writer.
func (q *outbox) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closeLocked()
}

func (q *outbox) closeLocked() {
	if !q.closed {
		q.closed = true
		if q.done != nil {
			close(q.done)
		}
	}
}

// responseStream writes one HTTP response: a single JSON body, or an SSE
// stream of events once the first message goes out ahead of the answer.
// Only the goroutine serving the request uses it. Every write is bounded by
// the write timeout, and no deadline is left in place between writes, so a
// quiet stream stays open however long it lasts.
type responseStream struct {
	w       http.ResponseWriter
	rc      http.ResponseController // of w
	timeout time.Duration
	started bool // the status line and headers went out
	sse     bool // ... as text/event-stream
	// bounded: the whole response was written (raw), and the deadline of
	// that write stays in place for what the server still writes (finish).
	bounded bool
	// conn is the connection w writes to, when known (connOf): raw keeps
	// the write deadline the server set as it read the request when that
	// leaves at least half the timeout.
	conn *countedConn
	// length holds the Content-Length of a JSON response (raw): a header's
	// values are replaced, never written in place, so it can be the slice
	// the header map holds.
	length [1]string
}

func newResponseStream(w http.ResponseWriter, timeout time.Duration) *responseStream {
	rs := &responseStream{}
	rs.init(w, timeout)
	// The server may have set a deadline for the whole response; this
	// response bounds each write instead.
	_ = rs.rc.SetWriteDeadline(time.Time{})
	return rs
}

// init readies the zero rs to write to w (a POST's, in place). The
// deadline the server set for the whole response is left to the first
// write, which sets its own: every write of a POST's response goes through
// rs, or into the server's buffer, which is written after finish.
func (rs *responseStream) init(w http.ResponseWriter, timeout time.Duration) {
	rs.w, rs.rc, rs.timeout = w, *http.NewResponseController(w), timeout
}

// startSSE sends the headers of an SSE stream.
func (rs *responseStream) startSSE() error {
	if rs.started {
		return nil
	}
	h := rs.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // reverse proxies pass events on at once
	rs.started, rs.sse = true, true
	return rs.write(func() error {
		rs.w.WriteHeader(http.StatusOK)
		return nil
	})
}

// event writes m as one SSE event, starting the stream if need be.
func (rs *responseStream) event(m *jsonrpc.Message) error {
	return rs.rawEvent(m.Encode())
}

// rawEvent writes an encoded message as one SSE event, starting the stream
// if need be.
func (rs *responseStream) rawEvent(enc []byte) error {
	if err := rs.startSSE(); err != nil {
		return err
	}
	return rs.write(func() error {
		_, err := rs.w.Write(appendEventData(nil, enc))
		return err
	})
}

// heartbeat writes an SSE comment line, starting the stream if need be.
func (rs *responseStream) heartbeat() error {
	if err := rs.startSSE(); err != nil {
		return err
	}
	return rs.write(func() error {
		_, err := rs.w.Write([]byte(": keep-alive\n\n"))
		return err
	})
}

// json writes m as the whole response; it is only called before anything
// else was written. m is encoded into a pooled buffer: a server's response
// has written it (into its buffer, or through it) once raw returns. The
// response of a request in a batch keeps what it is given (bufferedResponse),
// and gets an encoding of its own.
func (rs *responseStream) json(status int, m *jsonrpc.Message) error {
	if _, keeps := rs.w.(*bufferedResponse); keeps {
		return rs.raw(status, m.Encode())
	}
	bp := answerBuffers.Get().(*[]byte)
	b := m.Append((*bp)[:0])
	err := rs.raw(status, b)
	if cap(b) <= maxPooledAnswer {
		*bp = b[:0]
		answerBuffers.Put(bp)
	}
	return err
}

// answerBuffers hold the encodings of JSON answers while they are written.
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledAnswer is the largest buffer kept for another answer: a large
// result's would hold its memory for as long as the pool keeps it.
const maxPooledAnswer = 64 << 10

// raw writes body, JSON, as the whole response; it is only called before
// anything else was written.
func (rs *responseStream) raw(status int, body []byte) error {
	h := rs.w.Header()
	h["Content-Type"] = jsonContentType // the canonical key, set as Set would
	rs.length[0] = strconv.Itoa(len(body))
	h["Content-Length"] = rs.length[:] // as Set would, in rs's own slice
	rs.started, rs.bounded = true, true
	// Nothing follows: the deadline of this write also bounds what the
	// server writes after the handler returns (finish), so it is set once
	// and not cleared (the server sets its own for the next request on the
	// connection). The one the server set as it read this request (its
	// WriteTimeout, under Serve) is kept while it leaves half the timeout,
	// as it does for all but slow calls: a deadline change costs about a
	// microsecond.
	if !rs.deadlineAhead() {
		_ = rs.rc.SetWriteDeadline(time.Now().Add(rs.timeout))
	}
	rs.w.WriteHeader(status)
	_, err := rs.w.Write(body)
	if err == nil {
		err = rs.rc.Flush()
	}
	return err
}

// deadlineAhead reports whether the write deadline in place on the
// connection leaves at least half the timeout.
func (rs *responseStream) deadlineAhead() bool {
	if rs.conn == nil {
		return false
	}
	dl := rs.conn.writeDeadline()
	return !dl.IsZero() && time.Until(dl) >= rs.timeout/2
}

// jsonContentType is the Content-Type of a JSON response, one slice for
// every response: a header's values are replaced (Set) or appended to
// (Add, which copies a full slice), never written in place.
var jsonContentType = []string{"application/json"}

// status writes a body-less response.
func (rs *responseStream) status(code int) {
	rs.started = true
	_ = rs.write(func() error {
		rs.w.WriteHeader(code)
		return nil
	})
}

// write runs one write and flushes it within the write timeout.
func (rs *responseStream) write(f func() error) error {
	_ = rs.rc.SetWriteDeadline(time.Now().Add(rs.timeout))
	err := f()
	if err == nil {
		err = rs.rc.Flush()
	}
	_ = rs.rc.SetWriteDeadline(time.Time{})
	return err
}

// finish bounds what the server still writes after the handler returns
// (the end of a chunked body).
func (rs *responseStream) finish() {
	if !rs.bounded {
		_ = rs.rc.SetWriteDeadline(time.Now().Add(rs.timeout))
	}
}

// appendEvent appends m as an SSE "message" event. A line break in the
// encoding (insignificant whitespace of a raw payload; JSON strings cannot
// hold one) starts a new data line, which the client joins back with a
// newline, so the event carries the message unchanged as JSON.
func appendEvent(b []byte, m *jsonrpc.Message) []byte {
	return appendEventData(b, m.Encode())
}

// appendEventData appends an encoded message as an SSE "message" event.
func appendEventData(b, enc []byte) []byte {
	b = append(b, "event: message\ndata: "...)
	for {
		i := bytes.IndexAny(enc, "\r\n")
		if i < 0 {
			b = append(b, enc...)
			break
		}
		b = append(append(b, enc[:i]...), "\ndata: "...)
		if enc[i] == '\r' && i+1 < len(enc) && enc[i+1] == '\n' {
			i++
		}
		enc = enc[i+1:]
	}
	return append(b, "\n\n"...)
}
