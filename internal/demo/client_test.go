package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary stand in for the aggregator binary: run as
// "<test binary> demo-server NAME [args]" it serves that demo server over
// its own stdio, which is how the process tests (and the ignore-term
// grandchild) start real server processes.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "demo-server" {
		if err := Run(context.Background(), os.Args[2], os.Args[3:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// waitTimeout bounds every wait in these tests; it is only reached when
// something is broken.
const waitTimeout = 20 * time.Second

// rpcError is a JSON-RPC error object as received.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// incoming is one line received from the server.
type incoming struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

type reply struct {
	result json.RawMessage
	err    *rpcError
	rawErr json.RawMessage
}

// testClient is a minimal JSON-RPC client talking to a server started with
// Run over in-memory pipes.
type testClient struct {
	t       *testing.T
	inW     *io.PipeWriter
	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int
	pending map[string]chan reply

	notifications chan incoming // server notifications
	unmatched     chan incoming // responses nobody is waiting for
	garbage       chan string   // lines that are not JSON objects

	stderr *lockedBuffer
	done   chan error // Run's result
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs demo server name in-process and returns a client for it. The
// server is shut down (stdin closed, Run awaited) when the test ends.
func start(t *testing.T, name string, args ...string) *testClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &testClient{
		t:             t,
		inW:           inW,
		pending:       map[string]chan reply{},
		notifications: make(chan incoming, 1000),
		unmatched:     make(chan incoming, 1000),
		garbage:       make(chan string, 1000),
		stderr:        &lockedBuffer{},
		done:          make(chan error, 1),
	}
	go func() {
		err := Run(context.Background(), name, args, inR, outW, c.stderr)
		_ = inR.Close()
		_ = outW.Close()
		c.done <- err
	}()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		c.read(outR)
	}()
	t.Cleanup(func() {
		require.NoError(t, c.stop())
		<-readerDone
	})
	return c
}

// stop closes the server's stdin and returns Run's result.
func (c *testClient) stop() error {
	_ = c.inW.Close()
	select {
	case err := <-c.done:
		c.done <- err // keep it for a second call
		return err
	case <-time.After(waitTimeout):
		return fmt.Errorf("server did not stop after stdin closed")
	}
}

func (c *testClient) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			c.mu.Lock()
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
	}
}

func (c *testClient) dispatch(line []byte) {
	var m incoming
	if err := json.Unmarshal(line, &m); err != nil {
		c.garbage <- string(line)
		return
	}
	if m.Method != "" {
		c.notifications <- m
		return
	}
	c.mu.Lock()
	ch, ok := c.pending[string(m.ID)]
	delete(c.pending, string(m.ID))
	c.mu.Unlock()
	if !ok {
		c.unmatched <- m
		return
	}
	r := reply{result: m.Result, rawErr: m.Error}
	if len(m.Error) > 0 {
		r.err = &rpcError{}
		if err := json.Unmarshal(m.Error, r.err); err != nil {
			r.err.Message = "undecodable error: " + err.Error()
		}
	}
	ch <- r
}

func (c *testClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(c.t, err)
	c.sendLine(b)
}

func (c *testClient) sendLine(b []byte) {
	c.t.Helper()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.inW.Write(append(b, '\n'))
	require.NoError(c.t, err)
}

// request sends a request and returns its id and a channel for the reply.
func (c *testClient) request(method string, params any) (int, <-chan reply) {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan reply, 1)
	c.pending[strconv.Itoa(id)] = ch
	c.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.send(msg)
	return id, ch
}

func (c *testClient) await(ch <-chan reply) reply {
	c.t.Helper()
	select {
	case r, ok := <-ch:
		require.True(c.t, ok, "connection closed before the reply arrived")
		return r
	case <-time.After(waitTimeout):
		c.t.Fatalf("no reply within %s; stderr:\n%s", waitTimeout, c.stderr.String())
		return reply{}
	}
}

// call sends a request and waits for its reply.
func (c *testClient) call(method string, params any) reply {
	c.t.Helper()
	_, ch := c.request(method, params)
	return c.await(ch)
}

// mustCall sends a request and returns its result, failing on an error.
func (c *testClient) mustCall(method string, params any) json.RawMessage {
	c.t.Helper()
	r := c.call(method, params)
	require.Nil(c.t, r.err, "%s failed: %+v", method, r.err)
	return r.result
}

func (c *testClient) notify(method string, params any) {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.send(msg)
}

func (c *testClient) nextNotification() incoming {
	c.t.Helper()
	select {
	case n := <-c.notifications:
		return n
	case <-time.After(waitTimeout):
		c.t.Fatalf("no notification within %s", waitTimeout)
		return incoming{}
	}
}

func (c *testClient) nextUnmatched() incoming {
	c.t.Helper()
	select {
	case m := <-c.unmatched:
		return m
	case <-time.After(waitTimeout):
		c.t.Fatalf("no unmatched response within %s", waitTimeout)
		return incoming{}
	}
}

// initialize performs the MCP handshake and returns the initialize result.
func (c *testClient) initialize(version string) map[string]any {
	c.t.Helper()
	res := c.mustCall("initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "demo-test", "version": "0"},
	})
	c.notify("notifications/initialized", nil)
	return decodeMap(c.t, res)
}

// toolResult is the part of a tools/call result the tests look at.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

func (c *testClient) callTool(name string, args map[string]any) toolResult {
	c.t.Helper()
	return decodeToolResult(c.t, c.mustCall("tools/call", map[string]any{"name": name, "arguments": args}))
}

func decodeToolResult(t *testing.T, raw json.RawMessage) toolResult {
	t.Helper()
	var r toolResult
	decodeExact(t, raw, &r)
	return r
}

// decodeAny decodes JSON keeping numbers exact.
func decodeAny(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	decodeExact(t, raw, &v)
	return v
}

// decodeExact decodes raw into v, keeping numbers exact.
func decodeExact(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(v), "json: %s", raw)
}

func decodeMap(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	m, ok := decodeAny(t, raw).(map[string]any)
	require.True(t, ok, "not an object: %s", raw)
	return m
}

func toolNames(t *testing.T, listResult json.RawMessage) []string {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(listResult, &res))
	names := make([]string, 0, len(res.Tools))
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}
