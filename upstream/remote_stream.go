package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// streamSink takes the messages eventTap takes out of a stream.
type streamSink interface {
	// streamNotified runs on the goroutine that reads the stream and must
	// not block.
	streamNotified(n Notification)
	// streamRequested must not block either; ctx is the context of the HTTP
	// exchange whose stream it is.
	streamRequested(ctx context.Context, req *jsonrpc.Message)
	// streamResponse takes a response out of the stream if it is one the
	// sink awaits (a legacy SSE upstream's answer to a raw request), and
	// reports whether it did; it must not block either.
	streamResponse(m *jsonrpc.Message) bool
	// streamRefused is told of a JSON-RPC batch, or a message in one, that
	// cannot be taken (splitBatch), and why; it must not block either.
	streamRefused(data []byte, why error)
}

// endpointSink is a streamSink that also vets the endpoint event of a
// legacy SSE stream before mcp-go reads it.
type endpointSink interface {
	// streamEndpoint is given the event's data and reports whether the
	// event goes on to mcp-go; it must not block.
	streamEndpoint(data string) bool
}

// eventTap reads an SSE response body the way mcp-go's transports do (lines
// end at "\n", an event at a blank line, data lines are joined with "\n")
// and takes every event that is a JSON-RPC notification or request (or a
// notification as leniently written as mcp-go accepts) out of it, handing the message, raw, to its sink; mcp-go then only ever sees the
// rest (responses, the endpoint event, comments), byte for byte. Of an
// event taken out, its id and retry lines stay, so that mcp-go's resumption
// cursor still moves past it.
//
// Because it reads the stream of one HTTP exchange, it knows whose stream a
// request arrived on: the context of the exchange names the Do that sent it
// (flightOf), or none for the GET stream.
type eventTap struct {
	src  *bufio.Reader
	body io.Closer
	ctx  context.Context
	sink streamSink

	event []byte // the raw lines of the current event
	keep  []byte // its id and retry lines
	kind  string // its event type
	data  []byte // its data, joined
	out   []byte // what mcp-go has yet to read
	err   error  // why src ended
}

func newEventTap(ctx context.Context, body io.ReadCloser, sink streamSink) *eventTap {
	return &eventTap{src: bufio.NewReader(body), body: body, ctx: ctx, sink: sink}
}

func (e *eventTap) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.err != nil {
			return 0, e.err
		}
		e.step()
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

func (e *eventTap) Close() error { return e.body.Close() }

// step reads one line. A line cannot grow past the message bound: the body
// under the tap (limitedBody) fails an event that does.
func (e *eventTap) step() {
	line, err := e.src.ReadBytes('\n')
	if len(line) > 0 {
		e.line(line)
	}
	switch {
	case err == io.EOF:
		// mcp-go handles an event the stream ends in the middle of.
		e.end(false)
		e.err = err
	case err != nil:
		e.err = err
	}
}

func (e *eventTap) line(line []byte) {
	line = validText(line) // by line: a line ends at a byte no UTF-8 sequence holds
	e.event = append(e.event, line...)
	text := bytes.TrimRight(line, "\r\n")
	if len(text) == 0 {
		e.end(true)
		return
	}
	if v, ok := bytes.CutPrefix(text, []byte("event:")); ok {
		e.kind = string(bytes.TrimSpace(v))
	} else if v, ok := bytes.CutPrefix(text, []byte("data:")); ok {
		v = bytes.TrimPrefix(v, []byte(" "))
		if len(e.data) > 0 {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, v...)
	} else if bytes.HasPrefix(text, []byte("id:")) || bytes.HasPrefix(text, []byte("retry:")) {
		e.keep = append(e.keep, line...)
	}
}

// end finishes the current event: a notification or request, or a
// response the sink takes, is handed to the sink and leaves only its id and
// retry lines behind; a batch is split (endBatch); anything else goes on to
// mcp-go as it came.
func (e *eventTap) end(blank bool) {
	defer func() {
		// data gets a new buffer: a message decoded from it keeps slices of it.
		e.event, e.keep, e.kind, e.data = e.event[:0], e.keep[:0], "", nil
	}()
	if e.kind == "endpoint" && len(e.data) > 0 {
		if s, ok := e.sink.(endpointSink); ok && !s.streamEndpoint(string(e.data)) {
			return // refused: mcp-go never sees it
		}
	}
	data := e.messageData()
	if isBatch(data) {
		e.endBatch(data, blank)
		return
	}
	m := eventMessage(data)
	if m != nil && m.IsResponse() && !e.sink.streamResponse(m) {
		m = nil
	}
	if m == nil {
		e.out = append(e.out, e.event...)
		return
	}
	e.hand(m)
	e.keepCursor(blank)
}

// endBatch finishes an event that carries a JSON-RPC batch (batch.go): its
// messages are taken one by one as if each had come in an event of its
// own, and each one not taken goes on to mcp-go in an event of its own,
// followed by the batch's id and retry lines, so that the id counts once all
// of the batch was read. A batch that cannot be taken goes on as it came.
func (e *eventTap) endBatch(data []byte, blank bool) {
	elems, err := splitBatch(data)
	if err != nil {
		e.sink.streamRefused(data, err)
		e.out = append(e.out, e.event...)
		return
	}
	for _, elem := range elems {
		if isBatch(elem) {
			e.sink.streamRefused(elem, errNestedBatch)
			continue
		}
		m := eventMessage(elem)
		if m == nil || (m.IsResponse() && !e.sink.streamResponse(m)) {
			e.out = append(e.out, "data: "...)
			e.out = append(append(e.out, elem...), "\n\n"...)
			continue
		}
		e.hand(m)
	}
	e.keepCursor(blank)
}

// hand gives the sink a notification or request taken out of the stream.
func (e *eventTap) hand(m *jsonrpc.Message) {
	switch {
	case m.IsNotification():
		e.sink.streamNotified(Notification{Method: m.Method, Params: m.Params, flight: flightOf(e.ctx)})
	case m.IsRequest():
		e.sink.streamRequested(e.ctx, m)
	}
}

// keepCursor leaves the id and retry lines of an event taken out of the
// stream, so that mcp-go's resumption cursor still moves past it.
func (e *eventTap) keepCursor(blank bool) {
	if len(e.keep) > 0 {
		e.out = append(e.out, e.keep...)
		if blank {
			e.out = append(e.out, '\n')
		}
	}
}

// messageData is the current event's data on one line if it is a message
// event, else nil. A message over several data lines is made one line
// again, so that it can go on down a newline-framed stream; data that is
// not JSON then is nil.
func (e *eventTap) messageData() []byte {
	if len(e.data) == 0 || (e.kind != "" && e.kind != "message") {
		return nil
	}
	data := e.data
	if bytes.ContainsAny(data, "\r\n") {
		var b bytes.Buffer
		if json.Compact(&b, data) != nil {
			return nil
		}
		data = b.Bytes()
	}
	return data
}

// eventMessage is data, an event's (messageData), as a JSON-RPC message, or
// nil. The message keeps slices of data.
func eventMessage(data []byte) *jsonrpc.Message {
	if len(data) == 0 {
		return nil
	}
	m, err := jsonrpc.DecodeOwned(data)
	if err != nil {
		return looseNotification(data)
	}
	return m
}

// looseNotification reads data that is not valid JSON-RPC as mcp-go's
// transports would: a message with a method and no id is a notification,
// whatever its "jsonrpc" member says. Its params stay as they came; anything
// else is nil.
func looseNotification(data []byte) *jsonrpc.Message {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &m) != nil || m.Method == "" || (len(m.ID) > 0 && string(m.ID) != "null") {
		return nil
	}
	if string(m.Params) == "null" {
		m.Params = nil
	}
	return &jsonrpc.Message{Method: m.Method, Params: m.Params}
}
