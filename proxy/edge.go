package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// mcp-go's server renders results through typed structs that drop what they
// do not model (unknown content types and annotation keys, error data, big
// integers). So the call handler hands mcp-go a tiny placeholder that carries
// a token, and the writers below, which sit between mcp-go and the wire,
// swap the placeholder for the upstream's raw JSON as it goes out. Nothing
// the upstream sent is ever decoded into a typed struct.

// rawMarker is the _meta key (and error message prefix) of placeholders.
const rawMarker = "mcp-aggregator/raw"

var markerBytes = []byte(rawMarker)

// rawKind says what a token stands for.
type rawKind int

const (
	rawResult rawKind = iota
	rawError
	rawToolList
)

type rawValue struct {
	kind    rawKind
	body    json.RawMessage
	created time.Time
}

// rawStore holds upstream payloads between the handler and the writer.
type rawStore struct {
	next    atomic.Int64
	mu      sync.Mutex
	values  map[string]rawValue
	catalog func() *Catalog
}

func newRawStore(catalog func() *Catalog) *rawStore {
	return &rawStore{values: map[string]rawValue{}, catalog: catalog}
}

func (s *rawStore) put(kind rawKind, body json.RawMessage) string {
	token := strconv.FormatInt(s.next.Add(1), 36)
	s.mu.Lock()
	s.values[token] = rawValue{kind: kind, body: body, created: time.Now()}
	s.mu.Unlock()
	return token
}

func (s *rawStore) take(token string) (rawValue, bool) {
	s.mu.Lock()
	v, ok := s.values[token]
	delete(s.values, token)
	s.mu.Unlock()
	return v, ok
}

// sweep drops payloads whose response was never written (the client
// cancelled or went away).
func (s *rawStore) sweep(olderThan time.Duration) {
	cutoff := time.Now().Add(-olderThan)
	s.mu.Lock()
	for k, v := range s.values {
		if v.created.Before(cutoff) {
			delete(s.values, k)
		}
	}
	s.mu.Unlock()
}

// message is an outgoing JSON-RPC response as mcp-go rendered it.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

type placeholder struct {
	Meta       map[string]json.RawMessage `json:"_meta"`
	ResultType json.RawMessage            `json:"resultType,omitempty"`
}

// substitute rewrites one JSON-RPC message if it is a placeholder; any
// other message comes back unchanged.
func (s *rawStore) substitute(msg []byte) []byte {
	if !bytes.Contains(msg, markerBytes) {
		return msg
	}
	var m message
	if json.Unmarshal(msg, &m) != nil || len(m.ID) == 0 {
		return msg
	}
	var token string
	var ph placeholder
	switch {
	case m.Error != nil:
		rest, ok := bytes.CutPrefix([]byte(m.Error.Message), []byte(rawMarker+":"))
		if !ok {
			return msg
		}
		token = string(rest)
	case len(m.Result) > 0:
		if json.Unmarshal(m.Result, &ph) != nil {
			return msg
		}
		if json.Unmarshal(ph.Meta[rawMarker], &token) != nil {
			return msg
		}
	default:
		return msg
	}
	v, ok := s.take(token)
	if !ok {
		return msg
	}
	var b bytes.Buffer
	b.Grow(len(v.body) + len(m.ID) + 64)
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(m.ID)
	switch v.kind {
	case rawError:
		b.WriteString(`,"error":`)
		b.Write(v.body)
	case rawToolList:
		b.WriteString(`,"result":{"tools":`)
		b.Write(s.catalog().ToolsJSON())
		if len(ph.ResultType) > 0 {
			b.WriteString(`,"resultType":`)
			b.Write(ph.ResultType)
		}
		b.WriteByte('}')
	default:
		b.WriteString(`,"result":`)
		b.Write(withResultType(v.body, ph.ResultType))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// withResultType adds the resultType member that protocol 2026-07-28
// requires when mcp-go put one in the placeholder and the upstream did not.
func withResultType(body, resultType json.RawMessage) json.RawMessage {
	if len(resultType) == 0 || bytes.Contains(body, []byte(`"resultType"`)) {
		return body
	}
	i := bytes.IndexByte(body, '{')
	if i < 0 {
		return body
	}
	out := make([]byte, 0, len(body)+len(resultType)+16)
	out = append(out, body[:i+1]...)
	out = append(out, `"resultType":`...)
	out = append(out, resultType...)
	rest := bytes.TrimLeft(body[i+1:], " \t\r\n")
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// lineWriter is the stdio edge: mcp-go writes one message per Write call,
// terminated by a newline.
type lineWriter struct {
	store    *rawStore
	progress *progressTracker
	out      interface{ Write([]byte) (int, error) }
	mu       sync.Mutex
}

func (w *lineWriter) Write(p []byte) (int, error) {
	body := bytes.TrimRight(p, "\n")
	sub := w.store.substitute(body)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(sub) == len(body) && (len(sub) == 0 || &sub[0] == &body[0]) {
		_, err := w.out.Write(p)
		w.progress.observe(body)
		return len(p), err
	}
	buf := make([]byte, 0, len(sub)+1)
	buf = append(buf, sub...)
	buf = append(buf, '\n')
	_, err := w.out.Write(buf)
	return len(p), err
}

// writeLine writes one whole message of the edge's own.
func (w *lineWriter) writeLine(msg []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.out.Write(append(msg, '\n'))
}

// httpWriter is the HTTP edge: mcp-go writes each response either as a JSON
// body (one Encode call) or as one SSE event per Write.
type httpWriter struct {
	http.ResponseWriter
	store    *rawStore
	progress *progressTracker
}

func (w *httpWriter) WriteHeader(code int) {
	// A substituted body has another length.
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w *httpWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, markerBytes) {
		n, err := w.ResponseWriter.Write(p)
		if data, ok := bytes.CutPrefix(p, []byte("event: message\ndata: ")); ok {
			w.Flush() // the observer below may release the final response
			w.progress.observe(bytes.TrimRight(data, "\n"))
		}
		return n, err
	}
	var out []byte
	if data, ok := bytes.CutPrefix(p, []byte("event: message\ndata: ")); ok {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return w.ResponseWriter.Write(p)
		}
		out = append(append([]byte("event: message\ndata: "), w.store.substitute(data[:i])...), data[i:]...)
	} else {
		trimmed := bytes.TrimRight(p, "\n")
		out = append(w.store.substitute(trimmed), p[len(trimmed):]...)
	}
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *httpWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *httpWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
