package downstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// httpSession is one session of the session-based generation: created by a
// successful initialize, ended by DELETE, idle expiry or Shutdown.
type httpSession struct {
	id     string
	ctx    context.Context // ends with the session (errSessionEnded) or the transport
	cancel context.CancelCauseFunc
	// work counts what is being served for the session (requests,
	// notifications, the GET stream), so that SessionClosed comes after all
	// of it.
	work sync.WaitGroup
	// protocol is the version negotiated at initialize, set before the
	// session is registered and only read after.
	protocol string
	// caps are the client capabilities declared at initialize, raw; set
	// before the initialize request is handed to the Handler, only read
	// after.
	caps json.RawMessage
	// asks are the server-to-client requests awaiting the client's answer,
	// whichever stream carried them.
	asks *outgoing
	// principal is who opened the session (see principalOf): its
	// authenticated principal (identity.WithCaller), else its address or the local
	// user; set before the session is registered, only read after.
	principal identity.Principal
	// caller is principal with the client and claims of the credentials
	// that opened the session; set with principal.
	caller identity.Caller
	// view is the view the session was opened at (ViewOf); its requests
	// must all come there. Set with principal.
	view string
	// holder is who the session counts against for the per-client shares
	// (fairshare.Of): its client, else the address that opened it.
	holder string
	// expires is when a sealed id stops opening (zero: a random id, which
	// opens as long as the session is open); resumedFrom is the replica the
	// session was taken up from ("" when it began here); sealedInfo is the
	// clientInfo its id carries. All set before the session is registered.
	expires     time.Time
	resumedFrom string
	sealedInfo  json.RawMessage
	// aliases are the ids reissue gave the session after its first (guarded
	// by the transport's mu).
	aliases []string

	mu       sync.Mutex
	closed   bool
	busy     int // the pieces of work in progress: a busy session is not idle
	lastUsed time.Time
	inflight map[callKey]context.CancelCauseFunc // request id (keyOf) -> cancel
	stream   *outbox                             // the open GET stream, or nil
}

func (t *HTTP) newSession() *httpSession {
	// 128 random bits, nothing else: the id is unguessable and tells nothing.
	var b [16]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancelCause(t.ctx)
	return &httpSession{
		id: t.opts.SessionIDPrefix + hex.EncodeToString(b[:]), ctx: ctx, cancel: cancel,
		lastUsed: time.Now(), inflight: make(map[callKey]context.CancelCauseFunc), asks: newOutgoing(),
	}
}

// Key implements Session: the Mcp-Session-Id.
func (s *httpSession) Key() string { return s.id }

// Notify implements Session: it queues msg on the session's GET stream.
func (s *httpSession) Notify(msg *jsonrpc.Message) bool {
	s.mu.Lock()
	q := s.stream
	s.mu.Unlock()
	return q != nil && q.offer(msg)
}

// ClientCapabilities implements Session.
func (s *httpSession) ClientCapabilities() json.RawMessage { return s.caps }

// Request implements Session: the request goes on the GET stream, which
// carries what is unrelated to any request of the client (messages tied to
// a request go on its POST's stream: Request.Ask). The response arrives as
// a POST of its own.
func (s *httpSession) Request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	return s.asks.call(ctx, method, params, s.Notify, func(m *jsonrpc.Message) { s.Notify(m) })
}

// answer hands a client's response to the request awaiting it, reporting
// false when none does.
func (s *httpSession) answer(msg *jsonrpc.Message) bool {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
	return s.asks.deliver(msg)
}

// logID is how logs name the session: its digest, as the status page and
// the lease log lines do.
func (s *httpSession) logID() string { return SessionDigest(s.id) }

// sessionGone is the answer to an id that names no open session, and to
// one that names another client's (checkClient).
func sessionGone() *httpError {
	return refusal(http.StatusNotFound, jsonrpc.CodeInvalidRequest,
		"session not found: it ended, was never issued, or was opened with other credentials; send initialize without Mcp-Session-Id to start a new one")
}

// begin counts one piece of work on s; it fails once s ended, so nothing
// reaches the Handler for a session after it ended.
func (s *httpSession) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.beginLocked()
}

func (s *httpSession) beginLocked() bool {
	if s.closed {
		return false
	}
	s.busy++ // busy, s is not idle; end marks when it was last used
	s.work.Add(1)
	return true
}

func (s *httpSession) end() {
	s.mu.Lock()
	s.busy--
	s.lastUsed = time.Now()
	s.mu.Unlock()
	s.work.Done()
}

// Attached implements downstream.Attached: the session has a request being
// served or its GET stream open.
func (s *httpSession) Attached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed && s.busy > 0
}

// beginRequest begins the request with id, cancelled by cancel when the
// client sends notifications/cancelled for it and when s ends
// (cancelRequests). It returns the request's key, for endRequest: an
// integer id's costs no string.
func (s *httpSession) beginRequest(id json.RawMessage, cancel context.CancelCauseFunc) (callKey, *httpError) {
	key := keyOf(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.inflight[key]; dup && !s.closed {
		return callKey{}, refusal(http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"request id %s is already in flight in this session: use a new id for each request", id)
	}
	if !s.beginLocked() {
		return callKey{}, sessionGone()
	}
	s.inflight[key] = cancel
	return key, nil
}

// endRequest ends the request beginRequest began with key.
func (s *httpSession) endRequest(key callKey) {
	s.mu.Lock()
	delete(s.inflight, key)
	s.mu.Unlock()
	s.end()
}

// cancelRequests ends the requests in flight in s, which has ended (no
// request begins in it any more), with cause. Their contexts derive from
// their HTTP requests', not from s.ctx, so that a call needs no watch of
// its own on the session's end (serveRequest).
func (s *httpSession) cancelRequests(cause error) {
	s.mu.Lock()
	cancels := make([]context.CancelCauseFunc, 0, len(s.inflight))
	for _, cancel := range s.inflight {
		cancels = append(cancels, cancel)
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
}

// cancelRequest applies notifications/cancelled, whose params are params.
func (s *httpSession) cancelRequest(key callKey, params json.RawMessage) {
	s.mu.Lock()
	cancel := s.inflight[key]
	s.lastUsed = time.Now()
	s.mu.Unlock()
	if cancel != nil {
		cancel(cancelCause(params))
	}
}

// openStream makes q the session's GET stream.
func (s *httpSession) openStream(q *outbox) *httpError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil && !s.closed {
		return refusal(http.StatusConflict, jsonrpc.CodeInvalidRequest,
			"this session already has a GET stream open: close it before opening another")
	}
	if !s.beginLocked() {
		return sessionGone()
	}
	s.stream = q
	return nil
}

func (s *httpSession) closeStream(q *outbox) {
	q.close()
	s.mu.Lock()
	if s.stream == q {
		s.stream = nil
	}
	s.mu.Unlock()
	s.end()
}

// markClosed closes s if it is open and, when idleSince is set, has been
// idle since then.
func (s *httpSession) markClosed(idleSince time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (!idleSince.IsZero() && (s.busy > 0 || s.lastUsed.After(idleSince))) {
		return false
	}
	s.closed = true
	if s.stream != nil {
		s.stream.close() // Notify fails from now on
	}
	s.asks.end() // and so does every request awaiting the client
	return true
}

func (s *httpSession) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// lookup returns the open session with id, or nil.
func (t *HTTP) lookup(id string) *httpSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[id]; s != nil {
		return s
	}
	return t.aliases[id]
}

// register makes s reachable by its id; it fails once Shutdown began.
func (t *HTTP) register(s *httpSession) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.sessions[s.id] = s
	if !t.sweeping {
		t.sweeping = true
		go t.sweepIdle()
	}
	return true
}

// endSession ends s (for expiry, only if it has been idle since idleSince):
// later requests with its id get 404, its requests' contexts and its GET
// stream end, and once all of its work has returned the Handler hears
// SessionClosed. It reports whether this call ended s.
func (t *HTTP) endSession(s *httpSession, idleSince time.Time, why string) bool {
	t.mu.Lock()
	if t.sessions[s.id] != s || !s.markClosed(idleSince) {
		t.mu.Unlock()
		return false
	}
	delete(t.sessions, s.id)
	for _, id := range s.aliases {
		delete(t.aliases, id)
	}
	t.perClient.Give(s.holder)
	t.ending.Add(1) // under mu, so Shutdown's wait sees it
	t.mu.Unlock()

	s.cancel(errSessionEnded)
	s.cancelRequests(context.Cause(s.ctx)) // errShutdown when Shutdown ended it
	t.log.Info("session ended", "session", s.logID(), "why", why)
	go func() {
		defer t.ending.Done()
		s.work.Wait()
		t.h.SessionClosed(s)
	}()
	return true
}

// sweepIdle ends the sessions idle for SessionIdleTTL, until Shutdown.
func (t *HTTP) sweepIdle() {
	ttl := t.opts.SessionIdleTTL
	tick := time.NewTicker(max(min(ttl/4, time.Minute), time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case now := <-tick.C:
			t.mu.Lock()
			open := make([]*httpSession, 0, len(t.sessions))
			for _, s := range t.sessions {
				open = append(open, s)
			}
			t.mu.Unlock()
			for _, s := range open {
				t.endSession(s, now.Add(-ttl), "idle")
			}
		}
	}
}

// sessionOf finds the session a GET, DELETE or non-initialize POST names.
func (t *HTTP) sessionOf(r *http.Request) (*httpSession, *httpError) {
	return t.sessionFrom(r, nil)
}

// sessionFrom is sessionOf of r, whose context carries c (nil: look).
func (t *HTTP) sessionFrom(r *http.Request, c *carried) (*httpSession, *httpError) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		return nil, refusal(http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"Mcp-Session-Id header is required; send initialize first")
	}
	if len(id) > MaxSessionIDLen {
		return nil, sessionGone()
	}
	s := t.lookup(id)
	if s == nil {
		var e *httpError
		if s, e = t.resume(r, id); e != nil {
			return nil, e
		}
	}
	if c == nil {
		looked := carriedBy(r)
		c = &looked
	}
	if e := s.checkCaller(c); e != nil {
		return nil, e
	}
	if !s.expires.IsZero() && !time.Now().Before(s.expires) {
		t.endSession(s, time.Time{}, "its sealed id expired")
		return nil, sessionGone()
	}
	if v := r.Header.Get(headerProtocol); v != "" && !protocol.Supported(v) {
		return nil, unsupportedVersion(nil, v)
	}
	return s, nil
}

// checkVersionHeader refuses a GET or DELETE whose MCP-Protocol-Version
// names a version the transport does not serve (a missing one is the
// oldest clients' way).
func checkVersionHeader(r *http.Request) *httpError {
	if v := r.Header.Get(headerProtocol); v != "" && !protocol.Supported(v) {
		return unsupportedVersion(nil, v)
	}
	return nil
}

// refusedSessionMethod refuses r, a GET or DELETE, and reports so, when
// its MCP-Protocol-Version is one the transport does not serve, or one
// without sessions, which is told why with notPart (a format naming that
// version).
func (t *HTTP) refusedSessionMethod(w http.ResponseWriter, r *http.Request, notPart string) bool {
	if e := checkVersionHeader(r); e != nil {
		t.refuse(w, r, e)
		return true
	}
	if v := r.Header.Get(headerProtocol); protocol.Modern(v) {
		w.Header().Set("Allow", http.MethodPost)
		t.refuse(w, r, refusal(http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, notPart, v))
		return true
	}
	return false
}

// serveGet serves a session's standalone stream: what Notify queues, as SSE
// events in order, with heartbeats, until the client leaves, the session
// ends, a write fails or the client falls a whole queue behind.
func (t *HTTP) serveGet(w http.ResponseWriter, r *http.Request) {
	if t.refusedSessionMethod(w, r, "GET is not part of protocol %s: open a subscriptions/listen request for server notifications") {
		return
	}
	if _, sse := accepts(r); !sse {
		t.refuse(w, r, refusal(http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest,
			"a GET stream is text/event-stream: list it in Accept"))
		return
	}
	s, e := t.sessionOf(r)
	if e != nil {
		t.refuse(w, r, e)
		return
	}
	q := newOutbox(t.opts.QueueSize, true)
	if e := s.openStream(q); e != nil {
		t.refuse(w, r, e)
		return
	}
	defer s.closeStream(q)

	// This goroutine is the stream's only writer.
	rs := newResponseStream(w, t.opts.WriteTimeout)
	defer rs.finish()
	if rs.startSSE() != nil {
		return
	}
	beat := time.NewTicker(t.opts.Heartbeat)
	defer beat.Stop()
	for {
		var err error
		select {
		case <-q.wake:
			for m := q.take(); m != nil; m = q.take() {
				if err = rs.event(m); err != nil {
					break
				}
			}
		case <-beat.C:
			err = rs.heartbeat()
		case <-q.done:
			if !s.ended() {
				t.log.Warn("closed a GET stream whose client fell behind", "session", s.logID(), "queue", t.opts.QueueSize)
			}
			return
		case <-s.ctx.Done():
			return
		case <-r.Context().Done():
			return
		}
		if err != nil {
			t.log.Info("closed a GET stream that could not be written", "session", s.logID(), "err", err)
			return
		}
	}
}

// serveDelete ends the session the request names.
func (t *HTTP) serveDelete(w http.ResponseWriter, r *http.Request) {
	if t.refusedSessionMethod(w, r, "DELETE is not part of protocol %s, which has no sessions") {
		return
	}
	s, e := t.sessionOf(r)
	if e == nil && !t.endSession(s, time.Time{}, "deleted by the client") {
		e = sessionGone()
	}
	if e == nil {
		t.bury(s)
	}
	if e != nil {
		t.refuse(w, r, e)
		return
	}
	w.WriteHeader(http.StatusOK)
}
