package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
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

// batchAnswer gathers the responses to a stdio batch's requests into the one
// array that answers the batch (JSON-RPC 2.0: in any order; none for a
// notification, and no array at all when nothing is answered). It holds
// at most DefaultMaxBatchBytes of them: each response past that is
// replaced by an error saying so, as over HTTP for a client that accepts
// only JSON (a stdio client has no stream to take them instead).
type batchAnswer struct {
	mu      sync.Mutex
	answers [][]byte
	held    int
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

// reply records the response to the request with id (nil: none is due)
// and, after the last, sends the batch's answer.
func (b *batchAnswer) reply(id json.RawMessage, line []byte) {
	b.mu.Lock()
	switch {
	case line == nil:
	case b.held+len(line) > DefaultMaxBatchBytes:
		b.answers = append(b.answers, jsonrpc.Failure(id, jsonrpc.Errorf(jsonrpc.CodeInternalError,
			"the answer to this request (%d bytes) would take the answers to its JSON-RPC batch past %d bytes, the most the aggregator holds for one batch: send the request on its own",
			len(line), DefaultMaxBatchBytes)).Encode())
	default:
		b.answers = append(b.answers, line)
		b.held += len(line)
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

// batchConcurrency bounds the requests of one batch served at once. Each
// holds its answer until the batch's response has taken it, so this also
// bounds the answers in memory while the response is written, whatever
// size they are.
const batchConcurrency = 8

// memberAnswer is one request's answer, for the batch's response.
type memberAnswer struct {
	id   json.RawMessage // the request's
	line []byte          // the encoded response
}

// batchResponse writes the answers to one batch. It is used only by the
// goroutine serving the POST, which takes the answers one by one as the
// requests are served.
//
// The answers are held for one JSON array, up to limit bytes. A client
// that accepts text/event-stream gets a stream instead once they would
// pass the limit, or once a heartbeat interval passed without all of them
// (as a single request's response turns into a stream): the held answers
// go out as events, and every later one as soon as it is taken. A client
// that accepts only JSON gets, for each answer that would take the array
// past the limit, an error naming the limit in its place.
type batchResponse struct {
	rs                    *responseStream
	acceptJSON, acceptSSE bool
	limit                 int64

	held      [][]byte
	heldBytes int64
	streaming bool
	failed    bool // a write failed: the client gets nothing more
}

// add takes one answer.
func (b *batchResponse) add(a memberAnswer) {
	switch {
	case b.failed:
	case b.streaming:
		b.event(a.line)
	case b.heldBytes+int64(len(a.line)) <= b.limit:
		b.hold(a.line)
	case b.acceptSSE:
		b.stream()
		b.event(a.line)
	default:
		// Errors are small, and at most MaxBatch of them are held.
		b.hold(jsonrpc.Failure(a.id, jsonrpc.Errorf(jsonrpc.CodeInternalError,
			"the answer to this request (%d bytes) would take the answers to its JSON-RPC batch past %d bytes (http.max_batch_bytes), the most the gateway holds for one batch: send the request on its own, accept text/event-stream to have a batch's answers streamed as they come, or have an operator raise http.max_batch_bytes",
			len(a.line), b.limit)).Encode())
	}
}

func (b *batchResponse) hold(line []byte) {
	b.held = append(b.held, line)
	b.heldBytes += int64(len(line))
}

// beat is a heartbeat interval passing: a client that accepts a stream
// gets one, which carries answers as they come and heartbeats while none
// does.
func (b *batchResponse) beat() {
	switch {
	case b.failed || !b.acceptSSE:
	case b.streaming:
		if b.rs.heartbeat() != nil {
			b.failed = true
		}
	default:
		b.stream()
	}
}

// request sends a request to the client (an elicitation a member asks)
// on the batch's stream, which it starts.
func (b *batchResponse) request(line []byte) {
	if !b.streaming {
		b.stream()
	}
	b.event(line)
}

// stream turns the response into a stream, sending the held answers.
func (b *batchResponse) stream() {
	b.streaming = true
	held := b.held
	b.held, b.heldBytes = nil, 0
	for _, line := range held {
		b.event(line)
	}
	if len(held) == 0 && b.rs.startSSE() != nil {
		b.failed = true
	}
}

func (b *batchResponse) event(line []byte) {
	if !b.failed && b.rs.rawEvent(line) != nil {
		b.failed = true
	}
}

// finish writes what is left once every request was answered: the JSON
// array, the events of a client that accepts no JSON, or 202 when nothing
// is answered.
func (b *batchResponse) finish() {
	switch {
	case b.failed || b.streaming:
	case len(b.held) == 0:
		b.rs.status(http.StatusAccepted)
	case b.acceptJSON:
		_ = b.rs.raw(http.StatusOK, joinArray(b.held))
	default:
		b.stream()
	}
}

// joinArray encodes answers as one JSON array.
func joinArray(answers [][]byte) []byte {
	n := 2
	for _, a := range answers {
		n += len(a) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, a := range answers {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, a...)
	}
	return append(out, ']')
}

// postBatch serves a POSTed batch in the session it names. Its requests
// are served as POSTs of their own would be, at most batchConcurrency at
// once, each into a buffer that is handed to the batch's response
// (batchResponse) as soon as it is served. Messages they send before
// their responses (progress, requests to the client) take the way they
// take for a POST answered with JSON, but for requests to the client of a
// client that accepts text/event-stream: those go on the batch's stream,
// which they start, while the other requests are served on (and without
// it, on the session's GET stream).
func (t *HTTP) postBatch(w http.ResponseWriter, r *http.Request, body []byte, acceptJSON, acceptSSE bool) {
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
	// The requests end with the POST, and when its response can no longer
	// be written.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(errResponseEnded)
	r = r.WithContext(ctx)

	rs := newResponseStream(w, t.opts.WriteTimeout)
	defer rs.finish()
	b := &batchResponse{rs: rs, acceptJSON: acceptJSON, acceptSSE: acceptSSE, limit: t.maxBatch.Load()}
	// The members' requests to the client, taken by this goroutine.
	toClient := make(chan []byte)
	var toBatch func(*jsonrpc.Message) bool
	if acceptSSE {
		toBatch = func(m *jsonrpc.Message) bool {
			select {
			case toClient <- m.Encode():
				return true
			case <-ctx.Done():
				return false
			}
		}
	}
	var requests []*post
	for _, raw := range elems {
		msg, answer := decodeBatched(raw)
		if msg == nil {
			b.hold(answer)
			continue
		}
		p := &post{w: &bufferedResponse{header: http.Header{}}, r: r, msg: msg, acceptJSON: true, toBatch: toBatch}
		if msg.IsRequest() {
			requests = append(requests, p)
			continue
		}
		t.postSession(p) // a notification or a response: applied in order
	}
	if len(requests) == 0 {
		b.finish()
		return
	}
	if !acceptJSON {
		b.stream() // events only, each as it comes
	}

	answers := make(chan memberAnswer) // taken one at a time by this goroutine
	slots := make(chan struct{}, batchConcurrency)
	for _, p := range requests {
		go func() {
			slots <- struct{}{}
			t.postSession(p)
			// The slot is held until the answer is taken, so that at most
			// batchConcurrency answers wait in memory.
			answers <- memberAnswer{id: p.msg.ID, line: p.w.(*bufferedResponse).answer()}
			<-slots
		}()
	}
	beat := time.NewTicker(t.opts.Heartbeat)
	defer beat.Stop()
	for pending := len(requests); pending > 0; {
		select {
		case a := <-answers:
			pending--
			if a.line != nil { // none for a request cut short
				b.add(a)
			}
		case line := <-toClient:
			b.request(line)
		case <-beat.C:
			b.beat()
		}
		if b.failed {
			cancel(errWriteFailed) // the rest is served to no one: end it
		}
	}
	b.finish()
}

// bufferedResponse is the response to one request of a batch, kept for the
// batch's answer.
type bufferedResponse struct {
	header http.Header
	body   []byte
}

func (b *bufferedResponse) Header() http.Header { return b.header }

// Write keeps p itself when it is the first write, which it is for every
// answer: the transport writes a JSON response whole, from an encoding
// made for that one write and not touched after (responseStream.json,
// writeJSON). So an answer of many MiB is not copied again.
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.body == nil {
		b.body = p
	} else {
		b.body = append(slices.Clip(b.body), p...) // never into the spare room of p
	}
	return len(p), nil
}

func (b *bufferedResponse) WriteHeader(int) {}

// FlushError and the deadlines let http.ResponseController drive it.
func (b *bufferedResponse) FlushError() error                { return nil }
func (b *bufferedResponse) SetWriteDeadline(time.Time) error { return nil }
func (b *bufferedResponse) SetReadDeadline(time.Time) error  { return nil }

// answer is the JSON-RPC message written, nil if none was: a request
// answered with JSON writes one whole message.
func (b *bufferedResponse) answer() []byte {
	if body := bytes.TrimSpace(b.body); len(body) > 0 && body[0] == '{' {
		return body
	}
	return nil
}
