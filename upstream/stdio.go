package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

// stdioConn speaks newline-delimited JSON-RPC (internal/jsonrpc's framing)
// to a child process.
//
// Concurrency rules:
//   - One goroutine reads stdout and dispatches; nothing it does blocks on
//     the upstream or on a caller: responses go to buffered channels, or
//     to the Completion of a started call, which must not block;
//     notifications to handlers that must not block, requests to at most
//     maxServerRequests goroutines.
//   - Writes take the one write slot (a channel, so a waiting writer gives
//     up when its ctx ends) and are bounded by the writer's ctx: its
//     deadline is the pipe's write deadline and its cancellation cuts the
//     write short. What the pipe takes at once is written first without
//     waiting (a non-blocking write(2), which cannot block); only the rest
//     waits, under that deadline. No mutex is held across a write.
//   - A write cut short after part of a message went out has broken the
//     framing: the connection fails (every pending call at once) and the
//     process is stopped.
//   - close never waits for the write slot: closing the pipe ends a blocked
//     write, and stopping the process ends the read.
type stdioConn struct {
	server string
	log    *slog.Logger
	proc   *supervise.Process
	// stdin is the parent's end of the child's stdin: a pipe of our own, so
	// that it is pollable and takes write deadlines.
	stdin     *os.File
	writeSlot chan struct{} // one slot: whoever holds it writes
	// pipe writes stdin without waiting while the pipe has room; used by
	// the holder of writeSlot only.
	pipe *pipeio.Pipe

	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[int64]waiter // by request id; nil once the connection failed
	// abandoned are the ids of the latest calls given up on, to tell their
	// late answers from answers to ids never sent; guarded by mu.
	abandoned abandonedIDs

	onNotify  func(Notification)
	onRequest requestHandler
	requests  slots // requests of the upstream being handled
	rejects   slots // "too many concurrent requests" answers being written
	notices   slots // cancellation notices being written
	dropped   throttledLog
	// junkBudget bounds the warnings about what the upstream wrote to
	// stdout for no call; used by the reader only.
	junkBudget lineBudget
	life       context.Context // ends when the connection fails
	end        context.CancelFunc

	maxMessage            int
	stdinGrace, termGrace time.Duration
	scrub                 func(string) string // see stdioOptions.scrub
	// lastWords are the last lines the server wrote to stderr, said when
	// it exits while it starts; stderrDone is closed once its stderr ended.
	// Once it has started (started), an exit says no more than its status:
	// its calls' errors go to clients, and what it wrote to stderr while
	// serving may be about any client's calls (it is in the log).
	lastWords  stderrTail
	stderrDone chan struct{}
	started    atomic.Bool
	stopOnce   sync.Once
	closing    atomic.Bool   // close was called: an exit is expected
	stopped    chan struct{} // closed when nothing of the process group is left
	closed     chan struct{}
	closeOnce  sync.Once
	lostOnce   sync.Once // lost reports the end once (read, watchLeader)
	failure    error     // why the connection failed; set before closed is closed
}

// reply is what a pending call receives: a result, or why there is none
// (the upstream's *jsonrpc.Error among others).
type reply struct {
	result json.RawMessage
	err    error
}

// stdioOptions are the settings of a stdio connection.
type stdioOptions struct {
	onNotify              func(Notification)
	onRequest             requestHandler
	maxMessage            int
	stdinGrace, termGrace time.Duration
	supervisor            *supervise.Supervisor // nil: a process group, no more
	// scrub removes the secrets from what the server wrote before it is cut
	// short for the log or an error (a stderr line, the last words, a stdout
	// line that is not JSON-RPC): a secret the cut splits is no longer
	// recognised. nil: texts are cut as written.
	scrub func(string) string
}

// startStdio spawns cmd in its own process group and starts reading its
// stdout and stderr.
func startStdio(server string, cmd *exec.Cmd, log *slog.Logger, opts stdioOptions) (*stdioConn, error) {
	// A missing working directory would fail the start with an error that names
	// only the command; say what is really wrong, and spawn nothing.
	if err := workDirError(cmd.Dir); err != nil {
		return nil, err
	}
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_, _ = stdinR.Close(), stdin.Close()
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		_, _ = stdinR.Close(), stdin.Close()
		return nil, err
	}
	proc, err := opts.supervisor.Start(server, cmd)
	_ = stdinR.Close() // the child has its own copy
	if err != nil {
		_ = stdin.Close()
		if dirErr := workDirError(cmd.Dir); dirErr != nil {
			return nil, dirErr // removed between the check above and the start
		}
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	if opts.maxMessage <= 0 {
		opts.maxMessage = jsonrpc.DefaultMaxMessage
	}
	life, end := context.WithCancel(context.Background())
	c := &stdioConn{
		server: server, log: log, proc: proc, stdin: stdin, writeSlot: make(chan struct{}, 1), pipe: pipeio.New(stdin),
		pending: map[int64]waiter{}, onNotify: opts.onNotify, onRequest: opts.onRequest,
		requests: newSlots(maxServerRequests), rejects: newSlots(maxServerRequests), notices: newSlots(maxNotices),
		life: life, end: end, maxMessage: opts.maxMessage,
		stdinGrace: opts.stdinGrace, termGrace: opts.termGrace, scrub: opts.scrub,
		closed: make(chan struct{}), stopped: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	go c.logStderr(stderr)
	go c.watchLeader()
	if f, ok := stdout.(*os.File); ok {
		go c.read(pipeio.New(f))
	} else {
		go c.read(stdout)
	}
	return c, nil
}

func (c *stdioConn) pid() int { return c.proc.PID() }

func (c *stdioConn) done() <-chan struct{} { return c.closed }

func (c *stdioConn) err() error {
	select {
	case <-c.closed:
		return c.failure
	default:
		return nil
	}
}

// fail marks the connection dead and fails every pending call at once.
func (c *stdioConn) fail(err error) {
	c.closeOnce.Do(func() {
		c.failure = err
		c.mu.Lock()
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		close(c.closed)
		c.end()
		for _, w := range pending {
			if w.started != nil {
				w.started.answered(reply{err: c.closedErr()})
				continue
			}
			close(w.ch)
		}
	})
}

// closedErr says why calls fail; only valid once closed is closed.
func (c *stdioConn) closedErr() error {
	if c.failure != nil {
		return fmt.Errorf("%w: %v", ErrClosed, c.failure)
	}
	return ErrClosed
}

// read is the one reader of the upstream's stdout. It ends when stdout
// does: the process exited, or close stopped it.
func (c *stdioConn) read(stdout io.Reader) {
	r := jsonrpc.NewReader(stdout, c.maxMessage)
	for {
		line, err := r.Read()
		if err == nil {
			c.dispatch(line)
			continue
		}
		// Declared here: errors.As would move it to the heap for every line.
		var tooLong *jsonrpc.TooLongError
		if !errors.As(err, &tooLong) {
			c.junkBudget.report(time.Now(), true, c.log, c.server, junkLeftOut)
			c.lost(err)
			return
		}
		c.oversized(tooLong)
	}
}

// leaderGrace is how long a server's stdout may stay open after the
// process exited: its last words are read meanwhile, and with nothing else
// holding stdout it ends at once.
const leaderGrace = 500 * time.Millisecond

// watchLeader ends the connection when the process it started exits, also
// while something the server left behind (a wrapper's child, a helper it
// forked) still holds stdout open, which would otherwise keep the reader
// waiting, the calls pending until their deadlines and the dead leader
// unreaped until pings failed. The server is that process: once it is gone,
// so is the server, and its stragglers are stopped with it (lost).
func (c *stdioConn) watchLeader() {
	select {
	case <-c.proc.Exited():
	case <-c.closed:
		return
	}
	select {
	case <-time.After(leaderGrace):
		if !c.closing.Load() { // close stopped it, and says so itself
			c.lost(io.EOF)
		}
	case <-c.closed:
	}
}

// lost handles the end of the server: stdout ended (the process exited or
// closed it), or the process exited while something else holds stdout
// (watchLeader). Only the first report counts.
func (c *stdioConn) lost(err error) {
	c.lostOnce.Do(func() { c.lose(err) })
}

func (c *stdioConn) lose(err error) {
	// Report how the process exited when that is quick to learn.
	select {
	case <-c.proc.Exited():
		// What it said last is most often why; its stderr ends about when
		// it exits.
		said := ""
		if !c.started.Load() {
			select {
			case <-c.stderrDone:
			case <-time.After(100 * time.Millisecond):
			}
			said = c.lastWords.said(c.scrub)
		}
		err = fmt.Errorf("server %q exited: %s%s", c.server, c.proc.ExitStatus(), said)
	case <-time.After(100 * time.Millisecond):
		if !errors.Is(err, io.EOF) {
			err = fmt.Errorf("server %q: reading stdout: %w", c.server, err)
		} else {
			err = fmt.Errorf("server %q closed its stdout", c.server)
		}
	}
	crashed := !c.closing.Load()
	c.fail(err)
	// The server is gone; whatever it left behind in its group goes too.
	go func() {
		c.shutdown()
		if crashed {
			c.log.Warn("upstream exited", "server", c.server, "status", exitText(c.proc.Reap()))
		}
	}()
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// oversized handles a message over the size limit: it was dropped unread,
// so the call it answers fails now rather than at its deadline.
func (c *stdioConn) oversized(e *jsonrpc.TooLongError) {
	id := e.OversizedID()
	if key, ok := sentID(id); ok {
		if w := c.take(key); w.waits() {
			w.deliver(reply{err: &oversizedResponse{server: c.server, exact: true, TooLongError: e}})
			return
		}
	}
	c.junk("upstream sent a message over the size limit; dropped", "server", c.server,
		"bytes", e.Size, "limit", e.Limit, "id", string(id), "start", c.excerpt(e.Head))
}

// utf8BOM is the byte order mark some runtimes write before their first line.
var utf8BOM = []byte("\xEF\xBB\xBF")

// malformedAnswer fails at once the pending call that a message that could
// not be decoded answers, when the message is a JSON object with the id of
// one and no method (see jsonrpc.AnswerID; what follows the id need not be
// readable, such as a result nested too deep): the call would otherwise wait
// for its deadline for an answer that already came. It reports whether there
// was such a call.
func (c *stdioConn) malformedAnswer(line []byte, decodeErr error) bool {
	id := jsonrpc.AnswerID(line)
	key, ok := sentID(id)
	if !ok {
		return false
	}
	w := c.take(key)
	if !w.waits() {
		return false
	}
	c.log.Warn("upstream answered a request with a malformed response", "server", c.server,
		"id", string(id), "bytes", len(line), "start", c.excerpt(line), "err", decodeErr)
	w.deliver(reply{err: fmt.Errorf("server %q sent a malformed response (%v); the server does not follow JSON-RPC 2.0, report it to its maintainers", c.server, decodeErr)})
	return true
}

// sentID reads a response's id as one the connection may have sent: a
// positive integer, written as an integer is (no sign, no leading zero, no
// fraction, no quotes). Any other id was never sent.
func sentID(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || len(raw) > 18 || raw[0] == '0' {
		return 0, false
	}
	var n int64
	for _, b := range raw {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int64(b-'0')
	}
	return n, true
}

// waiter is a pending call: a caller waiting on ch (roundTrip), or a
// call started without a caller that waits (Started).
type waiter struct {
	ch      chan reply
	started *Started
}

// waits reports whether w is a pending call (the zero waiter is none).
func (w waiter) waits() bool { return w.ch != nil || w.started != nil }

// deliver hands w its answer; it never blocks (ch has room for one).
func (w waiter) deliver(r reply) {
	if w.started != nil {
		w.started.answered(r)
		return
	}
	w.ch <- r
}

// take removes and returns the pending call with id key (none: the zero
// waiter).
func (c *stdioConn) take(key int64) waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.pending[key]
	delete(c.pending, key)
	return w
}

// abandon removes the pending call with id key, which its caller gave up
// on, and remembers it for late. Both under one lock: an answer that comes
// in between finds the call either pending or abandoned. It reports
// whether the call was pending: whoever takes a call out answers it.
func (c *stdioConn) abandon(key int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[key]; ok {
		delete(c.pending, key)
		c.abandoned.add(key)
		return true
	}
	return false
}

// late reports whether id is of a call given up on (see abandon), once.
func (c *stdioConn) late(id json.RawMessage) bool {
	key, ok := sentID(id)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned.take(key)
}

func (c *stdioConn) dispatch(line []byte) {
	// Some runtimes start their output with a byte order mark; it is no part
	// of the message.
	line = validText(bytes.TrimPrefix(line, utf8BOM))
	if isBatch(line) {
		c.dispatchBatch(line)
		return
	}
	c.dispatchOne(line)
}

// dispatchBatch handles a JSON-RPC batch (batch.go): each message in it is
// handled as if it came on a line of its own.
func (c *stdioConn) dispatchBatch(line []byte) {
	elems, err := splitBatch(line)
	if err != nil {
		c.junk("upstream wrote a JSON-RPC batch that cannot be taken; ignored", "server", c.server,
			"bytes", len(line), "start", c.excerpt(line), "err", err)
		return
	}
	for _, elem := range elems {
		if isBatch(elem) {
			c.junk("upstream wrote a batch inside a batch; ignored", "server", c.server, "start", c.excerpt(elem))
			continue
		}
		c.dispatchOne(elem)
	}
}

// dispatchOne handles one message; line may be reused once it returns.
func (c *stdioConn) dispatchOne(line []byte) {
	// The reader reuses line for the next one: msg borrows it, and what is
	// handed on is copied (for an answer, its result alone).
	var msg jsonrpc.Message
	if err := jsonrpc.DecodeBorrowed(&msg, line); err != nil {
		if c.malformedAnswer(line, err) {
			return
		}
		c.junk("upstream wrote a line that is not JSON-RPC; ignored", "server", c.server,
			"bytes", len(line), "start", c.excerpt(line), "err", err)
		return
	}
	switch {
	case msg.IsNotification():
		if c.onNotify != nil {
			c.onNotify(Notification{Method: msg.Method, Params: bytes.Clone(msg.Params)})
		}
	case msg.IsRequest():
		// Decoded again from a copy of its own, which its handler keeps.
		if req, err := jsonrpc.DecodeOwned(bytes.Clone(line)); err == nil {
			c.admit(req)
		}
	default:
		var w waiter
		if key, ok := sentID(msg.ID); ok {
			w = c.take(key)
		}
		if !w.waits() && len(msg.ID) > 2 && msg.ID[0] == '"' {
			// The id of a pending call, written as a string: not the id
			// sent, so not its answer, but the call is told at once rather
			// than left to wait for one that will not come.
			if key, ok := sentID(msg.ID[1 : len(msg.ID)-1]); ok {
				if w := c.take(key); w.waits() {
					c.log.Warn("upstream answered a request with its integer id written as a string", "server", c.server, "id", string(msg.ID))
					w.deliver(reply{err: fmt.Errorf("server %q answered request %d with the id %s, a string; JSON-RPC 2.0 requires the id exactly as sent, so the answer cannot be taken (report it to the server's maintainers)",
						c.server, key, msg.ID)})
					return
				}
			}
		}
		if !w.waits() {
			if c.late(msg.ID) {
				c.log.Debug("upstream answered a request after the aggregator gave up on it (timed out or cancelled); answer dropped",
					"server", c.server, "id", string(msg.ID))
				return
			}
			c.junk("upstream answered a request id we never sent; ignored", "server", c.server, "id", string(msg.ID))
			return
		}
		if msg.Error != nil {
			w.deliver(reply{err: msg.Error})
			return
		}
		if w.started != nil {
			// Completed now, on this goroutine, before line is read over:
			// the result is lent (Completion), not copied, and capped at
			// its end, so that appending to it copies rather than writes
			// over the lines read after it.
			n := len(msg.Result)
			w.started.answered(reply{result: msg.Result[:n:n]})
			return
		}
		w.deliver(reply{result: bytes.Clone(msg.Result)})
	}
}

// admit starts answering a request of the upstream, if one of the
// maxServerRequests slots is free. Otherwise the upstream is told "too many
// concurrent requests", or, when even those answers are backed up (the
// upstream does not read its stdin), the request is dropped with a log line.
// Either way the reader never blocks and the goroutines stay bounded.
func (c *stdioConn) admit(req *jsonrpc.Message) {
	switch {
	case c.requests.take():
		go func() {
			defer c.requests.release()
			c.answer(req)
		}()
	case c.rejects.take():
		go func() {
			defer c.rejects.release()
			c.send(tooManyRequests(req.ID))
		}()
	default:
		c.dropped.warn(c.log, "upstream sent more concurrent requests than the aggregator handles; dropped", "server", c.server,
			"method", req.Method, "id", string(req.ID))
	}
}

// answer handles a request the upstream sent us and writes the response.
func (c *stdioConn) answer(req *jsonrpc.Message) {
	resp, ok := answerLocally(req, c.onRequest)
	if !ok {
		resp = c.onRequest(c.life, req, 0)
	}
	if resp != nil {
		c.send(resp)
	}
}

// send writes a message the aggregator sends on its own, bounded by
// noticeTimeout.
func (c *stdioConn) send(m *jsonrpc.Message) {
	ctx, cancel := context.WithTimeout(c.life, noticeTimeout)
	defer cancel()
	if err := c.write(ctx, jsonrpc.AppendLine(nil, m)); err != nil && !errors.Is(err, ErrClosed) {
		c.log.Warn("could not write to upstream", "server", c.server, "err", err)
	}
}

func preview(b []byte) string {
	if len(b) > previewBytes {
		return string(b[:previewBytes]) + "…"
	}
	return string(b)
}

// previewBytes is how much of a value preview shows.
const previewBytes = 120

// excerpt is preview for what the server wrote to stdout, which may hold its
// secrets (a banner that shows its key): scrubbed before it is cut, so that a
// secret where the cut falls is replaced whole.
func (c *stdioConn) excerpt(b []byte) string {
	cut := len(b) > previewBytes+secretMargin
	text := string(b[:min(len(b), previewBytes+secretMargin)])
	if c.scrub != nil {
		text = c.scrub(text)
	}
	if cut || len(text) > previewBytes {
		return cutAtRune(text, previewBytes) + "…"
	}
	return text
}

// write sends one framed message. ctx bounds all of it: the wait for the
// write slot and the write itself.
func (c *stdioConn) write(ctx context.Context, line []byte) error {
	// A free slot is taken without a select over the three channels: most
	// writes find it free.
	select {
	case c.writeSlot <- struct{}{}:
	default:
		select {
		case c.writeSlot <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.closed:
			return c.closedErr()
		}
	}
	defer func() { <-c.writeSlot }()
	select {
	case <-c.closed:
		return c.closedErr()
	default:
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	// Most messages fit in the pipe at once: then they go out without
	// waiting, so there is nothing for a deadline or a cancellation to end
	// and neither is armed (one write(2), no timer, no context callback).
	n, _ := c.pipe.TryWrite(line) // an error shows again in the waiting write
	if n == len(line) {
		return nil
	}
	return c.writeRest(ctx, line, n)
}

// writeRest writes what is left of line after its first n bytes went out,
// waiting for room until ctx ends. The caller holds the write slot.
func (c *stdioConn) writeRest(ctx context.Context, line []byte, n int) error {
	// The rest waits for room, ending at ctx's deadline; if ctx is
	// cancelled earlier, a deadline in the past ends it then. Every waiting
	// write sets its own deadline, so the cancellation must have finished
	// before the slot is given up.
	deadline, _ := ctx.Deadline()
	_ = c.stdin.SetWriteDeadline(deadline)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.stdin.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	m, err := c.stdin.Write(line[n:])
	n += m
	if !stop() {
		<-fired
	}
	if err == nil {
		return nil
	}
	if c.closing.Load() || errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%w: server %q was closed", ErrClosed, c.server)
	}
	cause := err
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// Only ctx sets deadlines on stdin, so ctx has ended, or is ending
		// this instant (the pipe's timer may fire before ctx's).
		<-ctx.Done()
		cause = context.Cause(ctx)
	}
	if n > 0 {
		// The upstream holds part of a message and would read the next one
		// as its continuation: nothing more can be sent on this stream.
		broken := fmt.Errorf("server %q: a message to it was cut off after %d of %d bytes (%v); its stdin can no longer be framed, so the connection was closed",
			c.server, n, len(line), cause)
		c.log.Warn("closing upstream: a write to it was cut off", "server", c.server, "written", n, "size", len(line), "err", cause)
		c.fail(broken)
		go c.shutdown()
		return fmt.Errorf("server %q: the message was cut off after %d of %d bytes, so the connection was closed: %w", c.server, n, len(line), cause)
	}
	return fmt.Errorf("server %q: writing to stdin: %w", c.server, cause)
}

func (c *stdioConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return c.callRaw(ctx, method, nil)
	case json.RawMessage: // what Do forwards
		return c.callRaw(ctx, method, p)
	}
	id := c.nextID.Add(1)
	req, err := jsonrpc.Request(jsonrpc.IntID(id), method, params)
	if err != nil {
		return nil, err
	}
	return c.roundTrip(ctx, id, jsonrpc.AppendLine(nil, req), nil)
}

// callRaw is call with params already encoded (none when empty), written
// into a pooled buffer.
func (c *stdioConn) callRaw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	buf := lineBuffers.Get().(*[]byte)
	line := jsonrpc.AppendRequestLine((*buf)[:0], id, method, params)
	return c.roundTrip(ctx, id, line, buf)
}

// roundTrip sends line, request id, and waits for its answer. buf, when
// not nil, is the pooled buffer line was written into: it goes back to the
// pool once line is written in full, and is left to the collector when a
// write fails.
func (c *stdioConn) roundTrip(ctx context.Context, id int64, line []byte, buf *[]byte) (json.RawMessage, error) {
	key := id
	ch := replies.Get().(chan reply)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		<-c.closed
		return nil, c.closedErr()
	}
	c.pending[key] = waiter{ch: ch}
	c.mu.Unlock()
	if err := c.write(ctx, line); err != nil {
		// Part of the request may have gone out: an answer may yet come.
		c.abandon(key)
		return nil, err
	}
	if buf != nil && cap(line) <= maxPooledLine {
		*buf = line
		lineBuffers.Put(buf)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, c.closedErr()
		}
		replies.Put(ch)
		if r.err != nil {
			return nil, r.err
		}
		return r.result, nil
	case <-ctx.Done():
		c.abandon(key)
		c.cancelled(id, context.Cause(ctx))
		return nil, context.Cause(ctx)
	}
}

// lineBuffers hold the lines of requests written to upstreams, so that a
// call does not allocate one; a line over maxPooledLine is not kept.
var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledLine = 64 << 10

// replies are the channels calls wait on for their answer. A channel goes
// back only once its one answer was received: it was taken out of pending
// before that answer was sent, so nothing can send on it again. One given
// up on, or closed when the connection failed, is left to the collector.
var replies = sync.Pool{New: func() any { return make(chan reply, 1) }}

// cancelled tells the upstream a request was given up (cancelNotice).
func (c *stdioConn) cancelled(id int64, why error) {
	cancelNotice(c.notices, c.life, c.notify, id, why)
}

func (c *stdioConn) notify(ctx context.Context, method string, params any) error {
	m, err := jsonrpc.Notification(method, params)
	if err != nil {
		return err
	}
	return c.write(ctx, jsonrpc.AppendLine(nil, m))
}

// close runs the MCP stdio shutdown: close stdin, then escalate signals to
// the process group until nothing of it is left (see supervise.Process.Stop). It
// unblocks every pending call, read and write.
func (c *stdioConn) close() error {
	c.closing.Store(true)
	c.shutdown()
	c.fail(fmt.Errorf("server %q was closed", c.server))
	return nil
}

// shutdown closes stdin and stops the process group, once; later callers
// wait for the first to finish.
func (c *stdioConn) shutdown() {
	c.stopOnce.Do(func() {
		// Not under the write slot: a write blocked on a full pipe holds it,
		// and closing the pipe is what ends that write.
		_ = c.stdin.Close()
		c.proc.Stop(c.stdinGrace, c.termGrace)
		close(c.stopped)
	})
	<-c.stopped
}

func (c *stdioConn) logStderr(stderr io.Reader) {
	defer close(c.stderrDone)
	var budget lineBudget
	// A line is read a margin beyond what the log keeps, and one that must be
	// cut is scrubbed first, so that a secret the cut would split is replaced
	// whole. The log scrubs the others.
	stderrLines(stderr, maxStderrLine+secretMargin, func(line []byte, cut int64) {
		c.lastWords.add(line)
		now := time.Now()
		if !budget.take(now) {
			return // read all the same: a server blocked on stderr stops
		}
		budget.report(now, false, c.log, c.server, stderrLeftOut)
		text := string(line)
		if len(text) > maxStderrLine || cut > 0 {
			if c.scrub != nil {
				text = c.scrub(text)
			}
			if len(text) > maxStderrLine {
				kept := cutAtRune(text, maxStderrLine)
				cut += int64(len(text) - len(kept))
				text = kept
			}
		}
		if cut > 0 {
			text += fmt.Sprintf("… (%d more bytes)", cut)
		}
		c.log.Info("upstream stderr", "server", c.server, "line", text)
	})
	budget.report(time.Now(), true, c.log, c.server, stderrLeftOut)
}

const stderrLeftOut = "upstream writes to stderr faster than the log takes; lines left out"

// Warnings about what an upstream wrote to stdout that is not for any call
// (lines that are not JSON-RPC, answers to ids never sent, oversized
// messages) are logged a burst of junkBurst, then junkRate a second: a
// server that prints to stdout without end does not flood the log.
const (
	junkBurst = 100
	junkRate  = 10
)

// junk logs a warning about what the upstream wrote to stdout within the
// junk budget. Only the reader calls it.
func (c *stdioConn) junk(msg string, args ...any) {
	now := time.Now()
	if c.junkBudget.burst == 0 {
		c.junkBudget.burst, c.junkBudget.rate = junkBurst, junkRate
	}
	if !c.junkBudget.take(now) {
		return
	}
	c.junkBudget.report(now, false, c.log, c.server, junkLeftOut)
	c.log.Warn(msg, args...)
}

const junkLeftOut = "upstream writes to stdout what is not for the aggregator faster than the log takes; warnings left out"
