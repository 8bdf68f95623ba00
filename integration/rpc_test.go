package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The client below speaks JSON-RPC itself instead of using an MCP client library:
// typed clients decode results into structs (and error data into float64s), which
// would hide exactly the losses these tests look for. Every result, error and
// notification is kept as the raw bytes that came over the wire.

// protocolVersion is what the test client asks for in initialize.
const protocolVersion = "2025-11-25"

// callTimeout bounds one request; it is only reached when something is broken.
const callTimeout = 60 * time.Second

// message is one JSON-RPC message as received, every part raw.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// response is the answer to one request: Result or Error, exactly as sent.
type response struct {
	Result json.RawMessage
	Error  json.RawMessage
}

// notification is one server-to-client notification, params exactly as sent.
type notification struct {
	Method string
	Params json.RawMessage
}

// inbox records the notifications a client received, in arrival order, and the
// lines that were not JSON-RPC messages at all.
type inbox struct {
	mu      sync.Mutex
	notes   []notification
	garbage []string
	changed chan struct{}
	// onRequest, when set, answers the server's requests other than ping
	// (a client that declared sampling or elicitation).
	onRequest func(method string, params json.RawMessage) (result, rpcErr string)
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{})} }

func (b *inbox) add(n notification) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notes = append(b.notes, n)
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *inbox) addGarbage(line []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.garbage = append(b.garbage, string(line))
}

// snapshot returns the notifications received so far and a channel closed on the next.
func (b *inbox) snapshot() ([]notification, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]notification(nil), b.notes...), b.changed
}

func (b *inbox) invalidLines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.garbage...)
}

// dispatch routes one received message: a notification goes to the inbox, a request
// from the server is answered through answer (when the wire can answer), and a
// response is handed back to the caller with isResponse set.
func (b *inbox) dispatch(raw []byte, answer func(id json.RawMessage, result, rpcErr string)) (m message, isResponse bool) {
	if err := json.Unmarshal(raw, &m); err != nil {
		b.addGarbage(raw)
		return m, false
	}
	switch {
	case m.Method != "" && len(m.ID) == 0:
		b.add(notification{Method: m.Method, Params: m.Params})
	case m.Method != "":
		// A request from the server. The test client declares no capabilities, so
		// only ping can be expected.
		if answer != nil {
			if m.Method == "ping" {
				answer(m.ID, `{}`, "")
			} else if b.onRequest != nil {
				result, rpcErr := b.onRequest(m.Method, m.Params)
				answer(m.ID, result, rpcErr)
			} else {
				answer(m.ID, "", `{"code":-32601,"message":"the test client does not implement `+m.Method+`"}`)
			}
		}
	case len(m.ID) > 0:
		return m, true
	default:
		b.addGarbage(raw)
	}
	return m, false
}

// idKey is the form of a JSON-RPC id used to match a response with its request.
func idKey(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }

// wire carries messages between the test client and one server.
type wire interface {
	// exchange sends a request and waits for the response with the same id.
	exchange(ctx context.Context, id string, body []byte) (*response, error)
	// send sends a notification.
	send(ctx context.Context, body []byte) error
	// negotiated tells the wire the protocol version initialize settled on.
	negotiated(version string)
	close() error
}

// client is a raw JSON-RPC MCP client over a wire.
type client struct {
	t      testing.TB
	wire   wire
	inbox  *inbox
	lastID atomic.Int64
}

// newID returns a request id never used before by this client.
func (c *client) newID() int64 { return c.lastID.Add(1) }

// request sends method with params under id and waits for the response.
func (c *client) request(ctx context.Context, id int64, method string, params any) (*response, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	return c.wire.exchange(ctx, strconv.FormatInt(id, 10), body)
}

// mustRequest is request with a fresh id and the default timeout; a transport failure
// ends the test. It must be called from the test's goroutine.
func (c *client) mustRequest(method string, params any) *response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := c.request(ctx, c.newID(), method, params)
	require.NoError(c.t, err, "%s", method)
	return resp
}

// notify sends a notification.
func (c *client) notify(method string, params any) error {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return c.wire.send(ctx, body)
}

// initialize performs the handshake and returns the initialize result.
func (c *client) initialize() json.RawMessage {
	c.t.Helper()
	resp := c.mustRequest("initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "mcp-aggregator-integration", "version": "1.0.0"},
	})
	require.Empty(c.t, resp.Error, "initialize failed")
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	require.NoError(c.t, json.Unmarshal(resp.Result, &res))
	require.Equal(c.t, protocolVersion, res.ProtocolVersion, "negotiated protocol version")
	c.wire.negotiated(res.ProtocolVersion)
	require.NoError(c.t, c.notify("notifications/initialized", nil))
	return resp.Result
}

// listTools returns every tool of every page, each exactly as received.
func (c *client) listTools() []json.RawMessage {
	c.t.Helper()
	var tools []json.RawMessage
	params := map[string]any{}
	for range 100 {
		resp := c.mustRequest("tools/list", params)
		require.Empty(c.t, resp.Error, "tools/list failed")
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
		}
		require.NoError(c.t, json.Unmarshal(resp.Result, &page))
		tools = append(tools, page.Tools...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return tools
		}
		params = map[string]any{"cursor": *page.NextCursor}
	}
	c.t.Fatal("tools/list never ended: more than 100 pages")
	return nil
}

// callTool calls a tool and returns the response, result or error.
func (c *client) callTool(name string, args any) *response {
	c.t.Helper()
	return c.mustRequest("tools/call", map[string]any{"name": name, "arguments": args})
}

// callToolResult calls a tool and requires a result (isError may still be true).
func (c *client) callToolResult(name string, args any) json.RawMessage {
	c.t.Helper()
	resp := c.callTool(name, args)
	require.Empty(c.t, resp.Error, "tools/call %s answered with an error", name)
	return resp.Result
}

// waitNotification waits until a notification satisfying match has arrived.
func (c *client) waitNotification(match func(notification) bool, timeout time.Duration) (notification, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		notes, changed := c.inbox.snapshot()
		for _, n := range notes {
			if match(n) {
				return n, true
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			return notification{}, false
		}
	}
}

// stdioWire speaks newline-delimited JSON-RPC over a pair of pipes.
type stdioWire struct {
	inbox   *inbox
	writeMu sync.Mutex
	in      io.WriteCloser

	mu      sync.Mutex
	pending map[string]chan *response

	done    chan struct{} // closed when the reader stopped
	readErr error         // why it stopped; valid after done
}

func newStdioWire(in io.WriteCloser, out io.Reader, box *inbox) *stdioWire {
	w := &stdioWire{inbox: box, in: in, pending: map[string]chan *response{}, done: make(chan struct{})}
	go w.read(out)
	return w
}

func (w *stdioWire) read(out io.Reader) {
	defer close(w.done)
	r := bufio.NewReaderSize(out, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if body := bytes.TrimSpace(line); len(body) > 0 {
			if m, ok := w.inbox.dispatch(body, w.answer); ok {
				w.mu.Lock()
				ch := w.pending[idKey(m.ID)]
				delete(w.pending, idKey(m.ID))
				w.mu.Unlock()
				if ch != nil {
					ch <- &response{Result: m.Result, Error: m.Error}
				}
			}
		}
		if err != nil {
			w.readErr = err
			return
		}
	}
}

func (w *stdioWire) answer(id json.RawMessage, result, rpcErr string) {
	line := `{"jsonrpc":"2.0","id":` + string(id)
	if rpcErr != "" {
		line += `,"error":` + rpcErr + "}\n"
	} else {
		line += `,"result":` + result + "}\n"
	}
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	_, _ = io.WriteString(w.in, line)
}

func (w *stdioWire) write(body []byte) error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	_, err := w.in.Write(append(body, '\n'))
	return err
}

func (w *stdioWire) exchange(ctx context.Context, id string, body []byte) (*response, error) {
	ch := make(chan *response, 1)
	w.mu.Lock()
	w.pending[id] = ch
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
	}()
	if err := w.write(body); err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-w.done:
		select {
		case resp := <-ch:
			return resp, nil
		default:
		}
		return nil, fmt.Errorf("server closed stdout before answering request %s: %v", id, w.readErr)
	case <-ctx.Done():
		return nil, fmt.Errorf("request %s: %w", id, ctx.Err())
	}
}

func (w *stdioWire) send(_ context.Context, body []byte) error { return w.write(body) }

func (w *stdioWire) negotiated(string) {}

// close closes the server's stdin, which is how a stdio client disconnects.
func (w *stdioWire) close() error { return w.in.Close() }

// httpWire speaks MCP's streamable HTTP transport: one POST per message; a response
// arrives as a JSON body or on an SSE stream that may carry notifications first.
type httpWire struct {
	url   string
	inbox *inbox
	hc    *http.Client

	mu       sync.Mutex
	session  string // Mcp-Session-Id from the initialize response
	protocol string // MCP-Protocol-Version after initialize
}

func newHTTPWire(url string, box *inbox) *httpWire {
	return &httpWire{url: url, inbox: box, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

func (w *httpWire) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	w.mu.Lock()
	if w.session != "" {
		req.Header.Set("Mcp-Session-Id", w.session)
	}
	if w.protocol != "" {
		req.Header.Set("MCP-Protocol-Version", w.protocol)
	}
	w.mu.Unlock()
	resp, err := w.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		w.mu.Lock()
		if w.session == "" {
			w.session = id
		}
		w.mu.Unlock()
	}
	return resp, nil
}

func (w *httpWire) exchange(ctx context.Context, id string, body []byte) (*response, error) {
	resp, err := w.post(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("request %s: HTTP %s: %s", id, resp.Status, bytes.TrimSpace(text))
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json":
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("request %s: reading the body: %w", id, err)
		}
		if m, ok := w.inbox.dispatch(bytes.TrimSpace(raw), nil); ok && idKey(m.ID) == id {
			return &response{Result: m.Result, Error: m.Error}, nil
		}
		return nil, fmt.Errorf("request %s: the JSON body is not its response: %.300s", id, raw)
	case "text/event-stream":
		var found *response
		err := readSSE(resp.Body, func(data []byte) bool {
			if m, ok := w.inbox.dispatch(data, w.answer); ok && idKey(m.ID) == id {
				found = &response{Result: m.Result, Error: m.Error}
				return false
			}
			return true
		})
		if found != nil {
			return found, nil
		}
		if err == nil {
			err = errors.New("the stream ended without it")
		}
		return nil, fmt.Errorf("request %s: no response: %w", id, err)
	default:
		return nil, fmt.Errorf("request %s: unexpected Content-Type %q", id, resp.Header.Get("Content-Type"))
	}
}

// readSSE passes the data of each server-sent event to handle until handle returns
// false or the stream ends.
func readSSE(body io.Reader, handle func(data []byte) bool) error {
	r := bufio.NewReaderSize(body, 1<<20)
	var data []byte
	for {
		line, err := r.ReadBytes('\n')
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0 && len(line) > 0: // a blank line ends the event
			if len(data) > 0 && !handle(data) {
				return nil
			}
			data = nil
		case bytes.HasPrefix(trimmed, []byte("data:")):
			chunk := bytes.TrimPrefix(bytes.TrimPrefix(trimmed, []byte("data:")), []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, chunk...)
		}
		if err != nil {
			if len(data) > 0 {
				handle(data)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readReply reads the body of resp, a reply to one request, and closes it;
// data is its JSON-RPC message: the body itself, or the last event's data
// when it is an event stream.
func readReply(t testing.TB, resp *http.Response) (raw, data []byte) {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	data = raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_ = readSSE(bytes.NewReader(raw), func(d []byte) bool { data = d; return true })
	}
	return raw, data
}

func (w *httpWire) send(ctx context.Context, body []byte) error {
	resp, err := w.post(ctx, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("notification: HTTP %s: %s", resp.Status, bytes.TrimSpace(text))
	}
	return nil
}

// answer posts the client's response to a request the server sent on a
// stream; off the reader's goroutine, so the stream goes on being read.
func (w *httpWire) answer(id json.RawMessage, result, rpcErr string) {
	body := `{"jsonrpc":"2.0","id":` + string(id)
	if rpcErr != "" {
		body += `,"error":` + rpcErr + "}"
	} else {
		body += `,"result":` + result + "}"
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_ = w.send(ctx, []byte(body))
	}()
}

func (w *httpWire) negotiated(version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.protocol = version
}

// close ends the session with DELETE, as a well-behaved streamable HTTP client does,
// once: a session already ended is left alone.
func (w *httpWire) close() error {
	defer w.hc.CloseIdleConnections()
	w.mu.Lock()
	session := w.session
	w.mu.Unlock()
	if session == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, w.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := w.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("DELETE session: HTTP %s", resp.Status)
	}
	w.mu.Lock()
	if w.session == session {
		w.session = "" // ended: closing again has nothing to do
	}
	w.mu.Unlock()
	return nil
}

// contentItem is a content item of a tool result, as far as the tests look.
type contentItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolContent returns the content items of a tool result.
func toolContent(t testing.TB, result json.RawMessage) []contentItem {
	t.Helper()
	var r struct {
		Content []contentItem `json:"content"`
	}
	require.NoError(t, json.Unmarshal(result, &r))
	return r.Content
}

// firstText returns the text of a tool result's first content item.
func firstText(t testing.TB, result json.RawMessage) string {
	t.Helper()
	content := toolContent(t, result)
	require.NotEmpty(t, content, "result has no content: %.300s", result)
	require.Equal(t, "text", content[0].Type, "first content item of %.300s", result)
	return content[0].Text
}

// toolNames returns the names of raw tools, in order.
func toolNames(t testing.TB, tools []json.RawMessage) []string {
	t.Helper()
	names := make([]string, 0, len(tools))
	for _, raw := range tools {
		var tool struct {
			Name string `json:"name"`
		}
		require.NoError(t, json.Unmarshal(raw, &tool))
		names = append(names, tool.Name)
	}
	return names
}
