package downstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// JSON-RPC batches. Protocol 2025-03-26 added them to MCP ("implementations
// MUST support receiving JSON-RPC batches") and 2025-06-18 took them out
// again, so a batch is served for a session that negotiated 2025-03-26 and
// refused, saying why, for every other.

// batchProtocol is the one protocol version whose clients may send batches.
const batchProtocol = "2025-03-26"

// MaxBatch bounds the messages of one batch.
const MaxBatch = 100

// isBatch reports whether a client's message, as read, is a JSON array.
func isBatch(data []byte) bool {
	b := bytes.TrimLeft(bytes.TrimPrefix(data, bom), " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// splitBatch returns the messages of a batch sent in a session that speaks
// protocol, each raw, or the error that answers the whole batch.
func splitBatch(data []byte, protocol string) ([]json.RawMessage, *jsonrpc.Error) {
	switch {
	case protocol == "":
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"a JSON-RPC batch before initialize: send initialize alone first (it may not be part of a batch)")
	case protocol != batchProtocol:
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"JSON-RPC batches are part of MCP protocol %s only, and this session speaks %s: send one message at a time",
			batchProtocol, protocol)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(bytes.TrimPrefix(data, bom), &elems); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeParseError, "parse error: the batch is not a valid JSON array: %v", err)
	}
	switch {
	case len(elems) == 0:
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "an empty batch: a batch holds at least one message")
	case len(elems) > MaxBatch:
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"a batch of %d messages exceeds the limit of %d: send it as several batches", len(elems), MaxBatch)
	}
	return elems, nil
}

// decodeBatched decodes one message of a batch; a message that cannot be
// served gets its answer, for the batch's response, instead.
func decodeBatched(raw json.RawMessage) (*jsonrpc.Message, []byte) {
	msg, de := decodeClient(raw, false)
	if de != nil {
		id := de.ID
		if id == nil {
			id = []byte("null")
		}
		return nil, jsonrpc.Failure(id, &jsonrpc.Error{Code: de.Code, Message: de.Reason}).Encode()
	}
	if msg.IsRequest() && msg.Method == "initialize" {
		return nil, jsonrpc.Failure(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"initialize may not be part of a JSON-RPC batch: send it alone")).Encode()
	}
	return msg, nil
}

// batchAnswer gathers the responses to a batch's requests into the one
// array that answers the batch (JSON-RPC 2.0: in any order; none for a
// notification, and no array at all when nothing is answered).
type batchAnswer struct {
	mu      sync.Mutex
	answers [][]byte
	pending int // requests still being served
	// done receives the encoded array, or nil when nothing is answered,
	// once the last request was served.
	done func(array []byte)
}

// add records an answer given before the requests are served (a message
// that could not be decoded).
func (b *batchAnswer) add(line []byte) {
	b.mu.Lock()
	b.answers = append(b.answers, line)
	b.mu.Unlock()
}

// reply records one request's response (nil: none is due) and, after the
// last, sends the batch's answer.
func (b *batchAnswer) reply(line []byte) {
	b.mu.Lock()
	if line != nil {
		b.answers = append(b.answers, line)
	}
	b.pending--
	last := b.pending == 0
	b.mu.Unlock()
	if last {
		b.done(b.array())
	}
}

// array encodes the answers as one JSON array; nil when there are none.
func (b *batchAnswer) array() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.answers) == 0 {
		return nil
	}
	out := []byte{'['}
	for i, a := range b.answers {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, a...)
	}
	return append(out, ']')
}

// postBatch serves a POSTed batch in the session it names. Its requests
// are served as POSTs of their own would be, each into a buffer, and
// answered together: one JSON array, or, for a client that accepts no
// JSON, one event each. Messages they send before their responses
// (progress, requests to the client) take the way they take for a POST
// answered with JSON: requests go on the session's GET stream.
func (t *HTTP) postBatch(w http.ResponseWriter, r *http.Request, body []byte, acceptJSON bool) {
	if v := r.Header.Get(headerProtocol); protocol.Modern(v) {
		t.refuse(w, r, refusal(http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"protocol %s has no JSON-RPC batches: POST one message at a time", v))
		return
	}
	protocol := "" // without a session: before initialize
	if r.Header.Get(headerSessionID) != "" {
		s, e := t.sessionOf(r)
		if e != nil {
			t.refuse(w, r, e)
			return
		}
		protocol = s.protocol
	}
	elems, rpcErr := splitBatch(body, protocol)
	if rpcErr != nil {
		t.refuse(w, r, &httpError{status: http.StatusBadRequest, err: rpcErr})
		return
	}
	b := &batchAnswer{}
	var requests []*post
	for _, raw := range elems {
		msg, answer := decodeBatched(raw)
		if msg == nil {
			b.add(answer)
			continue
		}
		p := &post{w: newBufferedResponse(), r: r, msg: msg, acceptJSON: true}
		if msg.IsRequest() {
			requests = append(requests, p)
			continue
		}
		t.postSession(p) // a notification or a response: applied in order
	}
	var wg sync.WaitGroup
	for _, p := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.postSession(p)
		}()
	}
	wg.Wait()
	for _, p := range requests {
		if answer := p.w.(*bufferedResponse).answer(); answer != nil {
			b.add(answer)
		}
	}
	array := b.array()
	switch {
	case array == nil:
		w.WriteHeader(http.StatusAccepted)
	case acceptJSON:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(array)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(array)
	default:
		rs := newResponseStream(w, t.opts.WriteTimeout)
		defer rs.finish()
		for _, a := range b.answers {
			m, err := jsonrpc.DecodeOwned(a)
			if err != nil || rs.event(m) != nil {
				return
			}
		}
	}
}

// bufferedResponse is the response to one request of a batch, kept for the
// batch's answer.
type bufferedResponse struct {
	header http.Header
	body   bytes.Buffer
}

func newBufferedResponse() *bufferedResponse { return &bufferedResponse{header: http.Header{}} }

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(int)             {}

// FlushError and the deadlines let http.ResponseController drive it.
func (b *bufferedResponse) FlushError() error                { return nil }
func (b *bufferedResponse) SetWriteDeadline(time.Time) error { return nil }
func (b *bufferedResponse) SetReadDeadline(time.Time) error  { return nil }

// answer is the JSON-RPC message written, nil if none was: a request
// answered with JSON writes one whole message.
func (b *bufferedResponse) answer() []byte {
	if body := bytes.TrimSpace(b.body.Bytes()); len(body) > 0 && body[0] == '{' {
		return body
	}
	return nil
}
