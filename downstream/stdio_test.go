package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// stdioHandler answers every request with {"method": ...}; "slow" waits for
// its ctx or release, "progress" sends three progress notifications first.
type stdioHandler struct {
	handled  atomic.Int64
	release  chan struct{}
	opened   chan Session
	closed   chan Session
	notified chan *jsonrpc.Message
}

func newStdioHandler() *stdioHandler {
	return &stdioHandler{release: make(chan struct{}), opened: make(chan Session, 1), closed: make(chan Session, 1),
		notified: make(chan *jsonrpc.Message, 16)}
}

func (h *stdioHandler) Handle(ctx context.Context, req *Request) *jsonrpc.Message {
	h.handled.Add(1)
	switch req.Msg.Method {
	case "slow":
		select {
		case <-ctx.Done():
			return nil
		case <-h.release:
		}
	case "big":
		body, _ := json.Marshal(map[string]string{"method": "big", "text": strings.Repeat("b", 1<<20)})
		return &jsonrpc.Message{Result: body}
	case "id":
		// Its own id, padded to a length that varies with it.
		body, _ := json.Marshal(map[string]string{"id": string(req.Msg.ID), "pad": strings.Repeat("p", len(req.Msg.ID)*997%5000)})
		return &jsonrpc.Message{Result: body}
	case "progress":
		for i := 1; i <= 3; i++ {
			req.Send(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`{"progress":` + string(rune('0'+i)) + `}`)})
		}
	}
	body, _ := json.Marshal(map[string]string{"method": req.Msg.Method, "protocol": req.Protocol, "sessionless": strconv.FormatBool(req.Sessionless()), "principal": req.Principal.String()})
	return &jsonrpc.Message{Result: body}
}

func (h *stdioHandler) Notified(_ context.Context, _ Session, m *jsonrpc.Message) { h.notified <- m }
func (h *stdioHandler) SessionOpened(s Session)                                   { h.opened <- s }
func (h *stdioHandler) SessionClosed(s Session)                                   { h.closed <- s }

// stdioPeer is a client of ServeStdio over pipes: the operating system's,
// read and written as the aggregator's own stdin and stdout are
// (internal/pipeio).
type stdioPeer struct {
	in     io.WriteCloser
	out    *bufio.Scanner
	outR   io.ReadCloser
	served chan error
}

func startStdio(t *testing.T, h Handler, opts StdioOptions) *stdioPeer {
	t.Helper()
	p, _ := startStdioOn(t, h, opts, func(out *pipeio.Pipe) io.Writer { return out })
	return p
}

// startStdioOn is startStdio with the server's output wrapped by wrap.
func startStdioOn(t *testing.T, h Handler, opts StdioOptions, wrap func(*pipeio.Pipe) io.Writer) (*stdioPeer, *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	p := &stdioPeer{in: inW, outR: outR, out: bufio.NewScanner(outR), served: make(chan error, 1)}
	p.out.Buffer(nil, 4<<20)
	out := wrap(pipeio.New(outW))
	go func() {
		p.served <- ServeStdio(context.Background(), h, pipeio.New(inR), out, opts)
		_, _ = inR.Close(), outW.Close()
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return p, outW
}

func (p *stdioPeer) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(p.in, line+"\n")
	require.NoError(t, err)
}

func (p *stdioPeer) next(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	require.True(t, p.out.Scan(), "no more output: %v", p.out.Err())
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(p.out.Bytes(), &m), "%s", p.out.Bytes())
	return m
}

func TestStdioRejectsInvalidMessages(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":true,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"tools/call"}`,
		`{"jsonrpc":"1.0","id":1,"method":"tools/call"}`,
	} {
		p.send(t, bad)
		m := p.next(t)
		var e jsonrpc.Error
		require.NoError(t, json.Unmarshal(m["error"], &e), "%s answered %v", bad, m)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, e.Code, bad)
	}
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":`)
	m := p.next(t)
	assert.Contains(t, string(m["error"]), "-32700")
	assert.Equal(t, "null", string(m["id"]))
	assert.Zero(t, h.handled.Load(), "no invalid message reaches the handler")
}

func TestStdioOversizedMessage(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{MaxMessage: 1024})
	p.send(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"x":"`+strings.Repeat("a", 4096)+`"}}`)
	m := p.next(t)
	assert.Equal(t, "5", string(m["id"]))
	assert.Contains(t, string(m["error"]), "exceeds the limit of 1024 bytes")
	p.send(t, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	assert.Equal(t, "6", string(p.next(t)["id"]), "the connection goes on")
}

func TestStdioProgressBeforeResult(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":"p","method":"progress"}`)
	for i := 1; i <= 3; i++ {
		m := p.next(t)
		require.Equal(t, `"notifications/progress"`, string(m["method"]))
		assert.JSONEq(t, `{"progress":`+string(rune('0'+i))+`}`, string(m["params"]))
	}
	assert.Equal(t, `"p"`, string(p.next(t)["id"]))
}

func TestStdioCancellation(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	// The cancelled request gets no response: the next line is ping's.
	assert.Equal(t, "2", string(p.next(t)["id"]))
}

func TestStdioSessionAndNegotiatedVersion(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	assert.Equal(t, "0", string(p.next(t)["id"]))
	s := <-h.opened
	assert.Equal(t, "stdio", s.Key())
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Equal(t, "notifications/initialized", (<-h.notified).Method)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	assert.Contains(t, string(p.next(t)["result"]), `"protocol":"2026-07-28"`)
	assert.True(t, s.Notify(&jsonrpc.Message{Method: "notifications/tools/list_changed"}))
	assert.Equal(t, `"notifications/tools/list_changed"`, string(p.next(t)["method"]))
	p.in.Close()
	require.NoError(t, <-p.served)
	assert.Equal(t, s, <-h.closed)
}

// TestStdioUnsupportedMetaVersion: a request whose _meta names a protocol version the
// server does not speak is refused with -32022 and the versions it does, as over HTTP,
// and reaches no handler.
func TestStdioUnsupportedMetaVersion(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}}`)
	m := p.next(t)
	assert.Equal(t, "7", string(m["id"]))
	var e struct {
		Code int `json:"code"`
		Data struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(m["error"], &e), "%s", m["error"])
	assert.Equal(t, codeUnsupportedVersion, e.Code)
	assert.Equal(t, protocol.Versions, e.Data.Supported)
	assert.Equal(t, "1999-01-01", e.Data.Requested)
	p.send(t, `{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	assert.Equal(t, "8", string(p.next(t)["id"]), "the session goes on")
	assert.EqualValues(t, 1, h.handled.Load(), "only ping reached the handler")
}

// A client that stops reading stops being read: requests in flight never
// exceed MaxInFlight, so memory stays bounded however much it writes.
func TestStdioClientThatStopsReading(t *testing.T) {
	h := newStdioHandler()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe() // never read until the end
	const limit = 8
	served := make(chan error, 1)
	go func() {
		served <- ServeStdio(context.Background(), h, inR, outW, StdioOptions{MaxInFlight: limit})
	}()
	written := make(chan int, 1)
	go func() {
		n := 0
		for i := 0; i < 1000; i++ {
			if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":`+itoa(i)+`,"method":"ping"}`+"\n"); err != nil {
				break
			}
			n++
		}
		written <- n
	}()
	// The handler sees at most limit+1 requests (one more may be read and
	// wait for its slot) while nothing reads the output.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && h.handled.Load() < limit {
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, limit, h.handled.Load())
	select {
	case n := <-written:
		t.Fatalf("all %d requests were read while nothing read the results", n)
	case <-time.After(200 * time.Millisecond):
	}
	assert.EqualValues(t, limit, h.handled.Load())
	// Reading resumes everything.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(outR)
		for i := 0; i < 1000 && sc.Scan(); i++ {
		}
	}()
	assert.Equal(t, 1000, <-written)
	wg.Wait()
	inW.Close()
	require.NoError(t, <-served)
	assert.EqualValues(t, 1000, h.handled.Load())
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// countedPipe counts the writes that do not wait.
type countedPipe struct {
	*pipeio.Pipe
	tries atomic.Int64
}

func (c *countedPipe) TryWrite(b []byte) (int, error) {
	c.tries.Add(1)
	return c.Pipe.TryWrite(b)
}

// A response alone in flight is written by the goroutine that served it.
// One larger than the pipe goes out in part, and the rest is written by the
// writer ahead of everything queued after it: the client reads whole lines,
// in order.
func TestStdioResponseWrittenAtOnce(t *testing.T) {
	t.Parallel()
	h := newStdioHandler()
	var counted *countedPipe
	p, _ := startStdioOn(t, h, StdioOptions{}, func(out *pipeio.Pipe) io.Writer {
		require.True(t, out.Direct())
		counted = &countedPipe{Pipe: out}
		return counted
	})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	assert.JSONEq(t, `1`, string(p.next(t)["id"]))
	assert.EqualValues(t, 1, counted.tries.Load(), "the response went out without the writer")

	// Nothing reads while the large response is written, and more is
	// queued behind it.
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"big"}`)
	require.Eventually(t, func() bool { return counted.tries.Load() == 2 }, 5*time.Second, time.Millisecond)
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"progress","params":{"_meta":{"progressToken":1}}}`)
	big := p.next(t)
	assert.JSONEq(t, `2`, string(big["id"]))
	var result struct{ Text string }
	require.NoError(t, json.Unmarshal(big["result"], &result))
	assert.Equal(t, 1<<20, len(result.Text))
	for i := 1; i <= 3; i++ {
		m := p.next(t)
		require.JSONEq(t, `"notifications/progress"`, string(m["method"]))
		assert.JSONEq(t, `{"progress":`+itoa(i)+`}`, string(m["params"]))
	}
	assert.JSONEq(t, `3`, string(p.next(t)["id"]))
	p.in.Close()
	require.NoError(t, <-p.served)
}

// endingHandler tells when each request's context ends.
type endingHandler struct {
	*stdioHandler
	ended chan error
}

func (h endingHandler) Handle(ctx context.Context, req *Request) *jsonrpc.Message {
	h.handled.Add(1)
	<-ctx.Done()
	h.ended <- context.Cause(ctx)
	return nil
}

// When the server's context ends, every request in flight ends with it,
// though a request's context is not a child of the server's.
func TestStdioContextEndCancelsRequests(t *testing.T) {
	t.Parallel()
	h := endingHandler{stdioHandler: newStdioHandler(), ended: make(chan error, 3)}
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer inW.Close()
	defer outR.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- ServeStdio(ctx, h, pipeio.New(inR), pipeio.New(outW), StdioOptions{})
		_, _ = inR.Close(), outW.Close()
	}()
	for i := range 3 {
		_, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":`+itoa(i)+`,"method":"wait"}`+"\n")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.handled.Load() == 3 }, 5*time.Second, time.Millisecond)
	cancel()
	for range 3 {
		select {
		case cause := <-h.ended:
			assert.ErrorIs(t, cause, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("a request in flight did not end with the server's context")
		}
	}
	assert.ErrorIs(t, <-served, context.Canceled)
}

// TestWorkersExitWhenIdle checks that the workers a burst of requests
// started exit once nothing is run for a while, that a worker is reused
// while requests come, and that a request after they exited is run.
func TestWorkersExitWhenIdle(t *testing.T) {
	w := &workers{idle: make(chan func()), idleFor: 20 * time.Millisecond}
	var wg sync.WaitGroup
	release, started := make(chan struct{}), make(chan struct{})
	for range 4 {
		wg.Add(1)
		w.run(func() { defer wg.Done(); started <- struct{}{}; <-release })
	}
	for range 4 {
		<-started
	}
	assert.Equal(t, int32(4), w.live.Load(), "four requests at once run on four workers")
	close(release)
	wg.Wait()
	for range 20 {
		wg.Add(1)
		w.run(wg.Done) // one at a time: an idle worker takes each
		wg.Wait()
	}
	assert.LessOrEqual(t, w.live.Load(), int32(4), "idle workers are reused")
	require.Eventually(t, func() bool { return w.live.Load() == 0 }, 10*time.Second, time.Millisecond,
		"idle workers exit")
	wg.Add(1)
	w.run(wg.Done) // a request after the workers exited starts one
	wg.Wait()
}

// Responses are encoded into buffers that are used again once written:
// every response the client reads is whole and its own, while many are
// written at once, some alone and some together.
func TestStdioResponseBuffersAreTheirOwn(t *testing.T) {
	t.Parallel()
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	const n = 2000
	go func() {
		for i := range n {
			if _, err := io.WriteString(p.in, `{"jsonrpc":"2.0","id":`+itoa(i)+`,"method":"id"}`+"\n"); err != nil {
				return
			}
		}
	}()
	seen := map[string]bool{}
	for i := range n {
		m := p.next(t)
		var result struct{ ID, Pad string }
		require.NoError(t, json.Unmarshal(m["result"], &result))
		require.Equal(t, string(m["id"]), result.ID, "response %d carries another's result", i)
		require.Len(t, result.Pad, len(result.ID)*997%5000)
		seen[result.ID] = true
	}
	assert.Len(t, seen, n)
	p.in.Close()
	require.NoError(t, <-p.served)
}

func TestStdioDuplicateID(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"slow"}`)
	// The same id, written as a string: ids that spell the same integer
	// are the same request's, as some peers echo one as the other.
	p.send(t, `{"jsonrpc":"2.0","id":"7","method":"ping"}`)
	m := p.next(t)
	assert.Equal(t, `"7"`, string(m["id"]))
	var e jsonrpc.Error
	require.NoError(t, json.Unmarshal(m["error"], &e), "%v", m)
	assert.Equal(t, jsonrpc.CodeInvalidRequest, e.Code)
	assert.Contains(t, e.Message, "already in use")
	// The refusal left the first request as it was.
	h.release <- struct{}{}
	m = p.next(t)
	assert.Equal(t, "7", string(m["id"]))
	assert.Contains(t, string(m["result"]), `"slow"`)
}

// A request's id is free for the client's next request as soon as the
// client has its response.
func TestStdioIDFreeOnceAnswered(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	for i := range 2000 {
		p.send(t, `{"jsonrpc":"2.0","id":"same","method":"ping"}`)
		m := p.next(t)
		require.Contains(t, string(m["result"]), `"ping"`, "request %d: %v", i, m)
	}
}

// holdHandler answers "hold" with its own params once released, and
// anything else at once.
type holdHandler struct {
	stdioHandler
	release chan struct{}
}

func (h *holdHandler) Handle(ctx context.Context, req *Request) *jsonrpc.Message {
	if req.Msg.Method == "hold" {
		<-h.release
		return &jsonrpc.Message{Result: req.Msg.Params}
	}
	return &jsonrpc.Message{Result: json.RawMessage(`{}`)}
}

// A request's message stays as it came while the lines after it are read:
// it is decoded where it was read, which later reads never write over.
func TestStdioRequestKeepsItsBytesWhileReadingGoesOn(t *testing.T) {
	h := &holdHandler{stdioHandler: *newStdioHandler(), release: make(chan struct{})}
	p := startStdio(t, h, StdioOptions{})
	held := `{"text":"` + strings.Repeat("h", 3000) + `"}`
	p.send(t, `{"jsonrpc":"2.0","id":"held","method":"hold","params":`+held+`}`)
	// More than the reader's buffers hold, so that it reads into new ones
	// and would write over the held request's bytes if it reused them.
	filler := `{"text":"` + strings.Repeat("f", 4000) + `"}`
	for i := range 100 {
		p.send(t, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"ping","params":`+filler+`}`)
		assert.Equal(t, strconv.Itoa(i), string(p.next(t)["id"]))
	}
	close(h.release)
	m := p.next(t)
	assert.Equal(t, `"held"`, string(m["id"]))
	assert.JSONEq(t, held, string(m["result"]))
}
