package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// maxLineBytes bounds one message from an upstream; a larger line is a
// protocol problem for that server, not a reason to exhaust memory.
const maxLineBytes = 256 << 20

// stdioConn speaks newline-delimited JSON-RPC to a child process.
type stdioConn struct {
	server  string
	log     *slog.Logger
	proc    *process
	stdin   io.WriteCloser
	writeMu sync.Mutex

	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[string]chan envelope

	onNotify  func(Notification)
	onRequest func(method string, params json.RawMessage) (any, *RPCError)

	stdinGrace, termGrace time.Duration
	stopOnce              sync.Once
	closing               atomic.Bool   // close was called: an exit is expected
	stopped               chan struct{} // closed when nothing of the process group is left
	closed                chan struct{}
	closeOnce             sync.Once
	failure               error
}

// startStdio spawns command in its own process group and starts reading its
// stdout and stderr.
func startStdio(server string, cmd *exec.Cmd, log *slog.Logger, onNotify func(Notification),
	onRequest func(string, json.RawMessage) (any, *RPCError), stdinGrace, termGrace time.Duration) (*stdioConn, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := startInGroup(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	c := &stdioConn{
		server: server, log: log, proc: newProcess(cmd), stdin: stdin,
		pending: map[string]chan envelope{}, onNotify: onNotify, onRequest: onRequest,
		stdinGrace: stdinGrace, termGrace: termGrace, closed: make(chan struct{}), stopped: make(chan struct{}),
	}
	go c.logStderr(stderr)
	go c.read(stdout)
	return c, nil
}

func (c *stdioConn) pid() int { return c.proc.cmd.Process.Pid }

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
		for _, ch := range pending {
			close(ch)
		}
	})
}

func (c *stdioConn) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			// The process's stdout is gone: it exited or closed it. Report
			// how it exited when that is quick to learn.
			select {
			case <-c.proc.exited:
				err = fmt.Errorf("server %q exited: %s", c.server, c.proc.status)
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
					c.log.Warn("upstream exited", "server", c.server, "status", exitText(c.proc.reap()))
				}
			}()
			return
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// readLine returns the next line without its terminator, however long, up
// to maxLineBytes; a longer line is discarded and reported as an error line.
func readLine(r *bufio.Reader) ([]byte, error) {
	chunk, err := r.ReadSlice('\n')
	if err == nil {
		return bytes.TrimRight(chunk, "\r\n"), nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return bytes.TrimRight(chunk, "\r\n"), err
	}
	buf := append([]byte(nil), chunk...)
	for {
		chunk, err = r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLineBytes {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return []byte("\x00oversized"), err
		}
		buf = append(buf, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimRight(buf, "\r\n"), err
		}
	}
}

func (c *stdioConn) dispatch(line []byte) {
	var msg envelope
	if err := json.Unmarshal(line, &msg); err != nil || msg.JSONRPC != "2.0" {
		c.log.Warn("upstream wrote a line that is not JSON-RPC; ignored", "server", c.server,
			"bytes", len(line), "start", preview(line))
		return
	}
	switch {
	case msg.Method != "" && len(msg.ID) == 0:
		if c.onNotify != nil {
			c.onNotify(Notification{Method: msg.Method, Params: msg.Params})
		}
	case msg.Method != "":
		go c.answer(msg)
	default:
		key := idKey(msg.ID)
		c.mu.Lock()
		ch, ok := c.pending[key]
		delete(c.pending, key)
		c.mu.Unlock()
		if !ok {
			c.log.Warn("upstream answered a request id we never sent; ignored", "server", c.server, "id", string(msg.ID))
			return
		}
		ch <- msg
	}
}

// answer replies to a request the upstream sent us.
func (c *stdioConn) answer(msg envelope) {
	var result any
	var rpcErr *RPCError
	switch {
	case msg.Method == "ping":
		result = struct{}{}
	case c.onRequest != nil:
		result, rpcErr = c.onRequest(msg.Method, msg.Params)
	default:
		rpcErr = &RPCError{Code: -32601, Message: "method not supported by the aggregator: " + msg.Method}
	}
	_ = c.write(reply{JSONRPC: "2.0", ID: msg.ID, Result: result, Error: rpcErr})
}

func preview(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func (c *stdioConn) write(v any) error {
	data, err := rawjson.Marshal(v)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return c.closedErr()
	default:
	}
	if _, err := c.stdin.Write(data); err != nil {
		return fmt.Errorf("server %q: writing to stdin: %w", c.server, err)
	}
	return nil
}

// writeRequest sends a request; pre-encoded params are framed by hand, the
// common case on the call path.
func (c *stdioConn) writeRequest(id int64, method string, params any) error {
	raw, ok := params.(json.RawMessage)
	if !ok {
		return c.write(outgoing{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	}
	b := make([]byte, 0, len(raw)+len(method)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":`...)
	b = rawjson.AppendString(b, method)
	b = append(b, `,"params":`...)
	b = append(b, raw...)
	b = append(b, "}\n"...)
	return c.writeLine(b)
}

// writeLine writes one framed message.
func (c *stdioConn) writeLine(line []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return c.closedErr()
	default:
	}
	if _, err := c.stdin.Write(line); err != nil {
		return fmt.Errorf("server %q: writing to stdin: %w", c.server, err)
	}
	return nil
}

func (c *stdioConn) closedErr() error {
	if c.failure != nil {
		return fmt.Errorf("%w: %v", ErrClosed, c.failure)
	}
	return ErrClosed
}

func (c *stdioConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	key := strconv.FormatInt(id, 10)
	ch := make(chan envelope, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return nil, c.closedErr()
	}
	c.pending[key] = ch
	c.mu.Unlock()
	if err := c.writeRequest(id, method, params); err != nil {
		c.forget(key)
		return nil, err
	}
	select {
	case msg, ok := <-ch:
		if !ok {
			return nil, c.closedErr()
		}
		if msg.Error != nil {
			return nil, msg.Error
		}
		return msg.Result, nil
	case <-ctx.Done():
		c.forget(key)
		_ = c.notify(context.Background(), "notifications/cancelled",
			cancelledParams{RequestID: id, Reason: context.Cause(ctx).Error()})
		return nil, context.Cause(ctx)
	}
}

func (c *stdioConn) forget(key string) {
	c.mu.Lock()
	delete(c.pending, key)
	c.mu.Unlock()
}

func (c *stdioConn) notify(_ context.Context, method string, params any) error {
	return c.write(outgoing{JSONRPC: "2.0", Method: method, Params: params})
}

// close runs the MCP stdio shutdown: close stdin, then escalate signals to
// the process group until nothing of it is left (see process.stop).
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
		c.writeMu.Lock()
		_ = c.stdin.Close()
		c.writeMu.Unlock()
		c.proc.stop(c.stdinGrace, c.termGrace)
		close(c.stopped)
	})
	<-c.stopped
}

func (c *stdioConn) logStderr(stderr io.Reader) {
	r := bufio.NewReaderSize(stderr, 16<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			c.log.Info("upstream stderr", "server", c.server, "line", string(line))
		}
		if err != nil {
			return
		}
	}
}
