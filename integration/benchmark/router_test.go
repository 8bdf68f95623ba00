package benchmark

import (
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// The router is the least an HTTP hop in front of a stdio upstream must do to route
// calls: a net/http handler that decodes each POST's JSON-RPC envelope with the
// aggregator's own decoder (internal/jsonrpc), gives the request an id of its own,
// writes it to the upstream's stdin through the aggregator's pipes (internal/pipeio),
// and answers the POST with the upstream's response, decoded, given its client's id
// back and encoded again. No sessions, no checks, no limits, no deadlines. Where the
// bridge only moves bytes, the router does what the aggregator cannot skip:
// proxied/router is the price of everything else the aggregator does with a call.

// stdioRouter is the router in front of one upstream.
type stdioRouter struct {
	writeMu sync.Mutex // one writer of the upstream's stdin at a time
	stdin   *pipeio.Pipe
	line    []byte // reused under writeMu

	mu      sync.Mutex
	next    int64
	pending map[int64]routed // by the router's own id
}

// routed is a request waiting for its response.
type routed struct {
	id     []byte // the client's id
	answer chan []byte
}

// serveRouter starts command and serves the router at /mcp in front of it.
func serveRouter(command []string) error {
	cmd, in, out, err := startChild(command)
	if err != nil {
		return err
	}
	rt := &stdioRouter{stdin: pipeio.New(in), pending: map[int64]routed{}}
	go func() {
		rt.read(pipeio.New(out))
		_ = cmd.Wait()
	}()
	return serveHTTPHelper(rt)
}

func (rt *stdioRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	m, err := jsonrpc.DecodeOwned(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if !m.IsRequest() {
		_ = rt.write(m)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := make(chan []byte, 1)
	rt.mu.Lock()
	rt.next++
	id := rt.next
	rt.pending[id] = routed{id: m.ID, answer: answer}
	rt.mu.Unlock()
	m.ID = strconv.AppendInt(nil, id, 10)
	relayAnswer(w, r, func() error { return rt.write(m) }, answer, func() {
		rt.mu.Lock()
		delete(rt.pending, id)
		rt.mu.Unlock()
	})
}

// write encodes m as one line to the upstream's stdin.
func (rt *stdioRouter) write(m *jsonrpc.Message) error {
	rt.writeMu.Lock()
	defer rt.writeMu.Unlock()
	rt.line = jsonrpc.AppendLine(rt.line[:0], m)
	_, err := rt.stdin.Write(rt.line)
	return err
}

// read hands each response from the upstream, its client's id restored, to the POST
// waiting for it, until the upstream's stdout ends.
func (rt *stdioRouter) read(out io.Reader) {
	r := jsonrpc.NewReader(out, 0)
	for {
		data, err := r.Read()
		if err != nil {
			return
		}
		m, err := jsonrpc.Decode(data)
		if err != nil || !m.IsResponse() {
			continue
		}
		id, _ := strconv.ParseInt(string(m.ID), 10, 64)
		rt.mu.Lock()
		p, ok := rt.pending[id]
		delete(rt.pending, id)
		rt.mu.Unlock()
		if ok {
			m.ID = p.id
			p.answer <- m.Encode()
		}
	}
}
