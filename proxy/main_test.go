package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// demoEnv names the demo server a child copy of this test binary serves.
const demoEnv = testproc.DemoEnv

// TestMain lets this test binary stand in for the upstream servers: started
// with MCPAGG_DEMO_SERVER set it serves that demo server on its stdio, so the
// proxy below fronts real processes.
func TestMain(m *testing.M) { testproc.Main(m) }

// waitTimeout bounds every wait; it is reached only when something is broken.
const waitTimeout = testproc.WaitTimeout

// wireMessage is one line the proxy wrote, kept whole.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Line   []byte          `json:"-"`
}

// stdioClient is a downstream client speaking newline-delimited JSON-RPC
// to Proxy.ServeStdio over pipes.
type stdioClient struct {
	t       *testing.T
	in      *io.PipeWriter
	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int
	pending map[string]chan wireMessage
	notes   []wireMessage
	changed chan struct{}

	served       chan error
	disconnected sync.Once
}

// connect serves p to a new client and completes the initialize handshake.
// Only one may be connected at a time: mcp-go keeps its stdio session in a
// package variable.
func connect(t *testing.T, p *Proxy) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{t: t, in: inW, pending: map[string]chan wireMessage{}, changed: make(chan struct{}), served: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		c.served <- p.ServeStdio(ctx, inR, outW)
		_ = outW.Close()
	}()
	go c.read(outR)
	t.Cleanup(func() {
		c.disconnect()
		cancel()
	})

	res := c.call("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "proxy-test", "version": "1.0.0"},
	})
	require.Empty(t, res.Error, "initialize: %s", res.Line)
	c.notify("notifications/initialized", nil)
	return c
}

// disconnect ends the client's stdin, as a closing IDE does, and waits for
// ServeStdio to return.
func (c *stdioClient) disconnect() {
	c.disconnected.Do(func() {
		_ = c.in.Close()
		select {
		case <-c.served:
		case <-time.After(waitTimeout):
			c.t.Error("ServeStdio did not return after stdin closed")
		}
	})
}

func (c *stdioClient) read(out io.Reader) {
	r := bufio.NewReaderSize(out, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			line = line[:len(line)-1]
			var m wireMessage
			if json.Unmarshal(line, &m) != nil {
				c.t.Errorf("the proxy wrote a line that is not JSON: %q", line)
				continue
			}
			m.Line = line
			c.mu.Lock()
			if m.Method != "" {
				c.notes = append(c.notes, m)
				close(c.changed)
				c.changed = make(chan struct{})
			} else if ch := c.pending[string(m.ID)]; ch != nil {
				delete(c.pending, string(m.ID))
				ch <- m
			}
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (c *stdioClient) send(v any) {
	c.t.Helper()
	line, err := json.Marshal(v)
	require.NoError(c.t, err)
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err = c.in.Write(append(line, '\n'))
	require.NoError(c.t, err)
}

func (c *stdioClient) notify(method string, params any) {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.send(msg)
}

// call sends a request and waits for its response.
func (c *stdioClient) call(method string, params any) wireMessage {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan wireMessage, 1)
	c.pending[strconv.Itoa(id)] = ch
	c.mu.Unlock()
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	select {
	case m := <-ch:
		return m
	case <-time.After(waitTimeout):
		c.t.Fatalf("no response to %s within %s", method, waitTimeout)
		return wireMessage{}
	}
}

// callTool calls a tool and returns the raw result, failing on a JSON-RPC error.
func (c *stdioClient) callTool(name string, args any) json.RawMessage {
	c.t.Helper()
	m := c.call("tools/call", map[string]any{"name": name, "arguments": args})
	require.Empty(c.t, m.Error, "tools/call %s: %s", name, m.Line)
	return m.Result
}

// notifications returns how many notifications of method arrived so far.
func (c *stdioClient) notifications(method string) []wireMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []wireMessage
	for _, n := range c.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// waitNotifications waits until at least n notifications of method arrived.
func (c *stdioClient) waitNotifications(method string, n int) []wireMessage {
	c.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		c.mu.Lock()
		changed := c.changed
		c.mu.Unlock()
		if got := c.notifications(method); len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			c.t.Fatalf("fewer than %d %s notifications within %s", n, method, waitTimeout)
		}
	}
}
