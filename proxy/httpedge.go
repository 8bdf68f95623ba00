package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// httpEdge serves tools/call for upstream tools on a streamable-HTTP
// session below mcp-go, as stdioEdge does on stdio: the request is decoded
// once and the upstream's raw bytes are written back, as a JSON body or, when
// the caller asked for progress, as an SSE stream whose last event is the
// result. Everything else, and every request this edge is unsure about,
// goes to mcp-go unchanged, which also keeps answering errors in its own
// words (unknown session, bad protocol version, DNS rebinding).
type httpEdge struct {
	p    *Proxy
	next http.Handler // mcp-go, behind the raw-substituting writer

	// sessions holds the live session ids (registered by mcp-go at
	// initialize, removed when it ends them) and when each was last shown
	// to mcp-go's idle sweeper.
	sessions sync.Map // id -> *atomic.Int64 (unix nanos of the last touch)
	touchGap time.Duration

	calls sync.Map // session + "\x00" + request id -> context.CancelFunc
}

// maxFastBody bounds the requests the edge reads itself; larger ones go to mcp-go.
const maxFastBody = 1 << 20

func (e *httpEdge) sessionStarted(id string) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	e.sessions.Store(id, &last)
}

func (e *httpEdge) sessionEnded(id string) { e.sessions.Delete(id) }

func (e *httpEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !e.eligible(r) {
		e.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFastBody+1))
	if err != nil || len(body) > maxFastBody || !e.serve(w, r, body) {
		// mcp-go reads the request as if untouched: what was read, then the rest.
		r.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), r.Body), Closer: r.Body}
		e.next.ServeHTTP(w, r)
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// eligible checks the headers: an established session of a session-based
// protocol version, reached under a proper Host.
func (e *httpEdge) eligible(r *http.Request) bool {
	sid := r.Header.Get("Mcp-Session-Id")
	version := r.Header.Get("MCP-Protocol-Version")
	if sid == "" || version == "" || version >= "2026" {
		return false
	}
	if _, ok := e.sessions.Load(sid); !ok {
		return false
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return false
	}
	// DNS rebinding: a loopback listener reached under a foreign Host is
	// mcp-go's to refuse.
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(local.String()) && !isLoopback(r.Host) {
		return false
	}
	select {
	case <-e.p.loaded:
		return true
	default:
		return false // calls wait for the first load inside mcp-go
	}
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serve takes the request if it is a call this edge serves or the
// cancellation of one, and reports whether it did.
func (e *httpEdge) serve(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !bytes.Contains(body, toolsCallMethod) && !bytes.Contains(body, cancelledMethod) {
		return false
	}
	var req stdioRequest
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	sid := r.Header.Get("Mcp-Session-Id")
	switch {
	case req.Method == "notifications/cancelled" && len(req.ID) == 0:
		var c struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &c) != nil {
			return false
		}
		cancel, ok := e.calls.Load(sid + "\x00" + string(bytes.TrimSpace(c.RequestID)))
		if !ok {
			return false // one of mcp-go's requests
		}
		cancel.(context.CancelFunc)()
		w.WriteHeader(http.StatusAccepted)
		return true
	case req.Method == "tools/call" && len(req.ID) > 0:
		var params stdioCallParams
		if json.Unmarshal(req.Params, &params) != nil {
			return false
		}
		if entry, ok := e.p.Catalog().Lookup(params.Name); !ok || entry.Server == adminServer {
			return false
		}
		_, wantsProgress := params.Meta["progressToken"]
		if wantsProgress && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			return false
		}
		e.touch(sid, r)
		e.call(w, r, sid, req.ID, params)
		return true
	}
	return false
}

// touch keeps mcp-go's idle-session sweeper informed: calls served here never
// pass through mcp-go, so now and then an internal ping on the session does.
func (e *httpEdge) touch(sid string, r *http.Request) {
	v, ok := e.sessions.Load(sid)
	if !ok {
		return
	}
	last := v.(*atomic.Int64)
	now := time.Now().UnixNano()
	prev := last.Load()
	if time.Duration(now-prev) < e.touchGap || !last.CompareAndSwap(prev, now) {
		return
	}
	ping, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, r.URL.String(),
		strings.NewReader(`{"jsonrpc":"2.0","id":"mcp-aggregator-keepalive","method":"ping"}`))
	if err != nil {
		return
	}
	ping.Host = r.Host
	for _, h := range []string{"Mcp-Session-Id", "MCP-Protocol-Version"} {
		ping.Header.Set(h, r.Header.Get(h))
	}
	ping.Header.Set("Content-Type", "application/json")
	ping.Header.Set("Accept", "application/json, text/event-stream")
	go e.next.ServeHTTP(discardWriter{header: http.Header{}}, ping)
}

// discardWriter swallows the answer to an internal keep-alive ping.
type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

func (e *httpEdge) call(w http.ResponseWriter, r *http.Request, sid string, id json.RawMessage, params stdioCallParams) {
	ctx, cancel := context.WithCancel(r.Context())
	key := sid + "\x00" + string(bytes.TrimSpace(id))
	e.calls.Store(key, cancel)
	defer func() {
		e.calls.Delete(key)
		cancel()
	}()

	inv := invocation{name: params.Name, key: sessionKey(sid), args: params.Arguments}
	var stream *sseStream
	if token, ok := params.Meta["progressToken"]; ok {
		stream = &sseStream{w: w}
		inv.token = token
		inv.progress = func(progress json.RawMessage) {
			stream.event(message3(`{"jsonrpc":"2.0","method":"notifications/progress","params":`, progress, `}`))
		}
		delete(params.Meta, "progressToken")
	}
	if len(params.Meta) > 0 {
		inv.meta = params.Meta
	}
	result, rpcErr, err := e.p.invoke(ctx, inv)
	var msg []byte
	switch {
	case err != nil:
		// Cancelled: no response is due; close the exchange plainly.
		if stream != nil {
			stream.finish(nil)
		} else {
			w.WriteHeader(http.StatusAccepted)
		}
		return
	case rpcErr != nil:
		msg = message5(`{"jsonrpc":"2.0","id":`, id, `,"error":`, rpcErr, `}`)
	default:
		msg = message5(`{"jsonrpc":"2.0","id":`, id, `,"result":`, result, `}`)
	}
	if stream != nil {
		stream.finish(msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(msg)
}

// sseStream writes one call's progress and its result as server-sent events.
// Progress can arrive from the upstream's reader while the call is finishing,
// so writes are serialized and none happens after the result.
type sseStream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	started bool
	done    bool
}

func (s *sseStream) event(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.write(data)
}

func (s *sseStream) finish(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	if data != nil {
		s.write(data)
	} else if !s.started {
		s.w.WriteHeader(http.StatusAccepted)
	}
	s.done = true
}

// write must be called with mu held.
func (s *sseStream) write(data []byte) {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	buf := make([]byte, 0, len(data)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, _ = s.w.Write(buf)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
