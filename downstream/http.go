package downstream

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/fairshare"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sealed"
)

// HTTPOptions configures the streamable-HTTP transport. A zero or negative
// field takes the default named on it. The names in parentheses are the
// config keys the error bodies point the operator to.
type HTTPOptions struct {
	// Logger receives the transport's own events; nil discards them.
	Logger *slog.Logger
	// SessionIdleTTL ends a session unused this long (default 30m;
	// --session-idle-ttl). A session with a request in flight or an open
	// GET stream is not idle.
	SessionIdleTTL time.Duration
	// MaxBodyBytes bounds a POST body (default 32 MiB; http.max_body_bytes):
	// a larger Content-Length is refused before anything is read, and a body
	// that grows past it while being read is refused too.
	MaxBodyBytes int64
	// MaxBatchBytes bounds the answers the transport holds for one JSON-RPC
	// batch's JSON array (default DefaultMaxBatchBytes;
	// http.max_batch_bytes). A client that accepts text/event-stream gets
	// the answers streamed instead once they would pass it; for one that
	// does not, each answer past it is replaced by an error naming it.
	MaxBatchBytes int64
	// AllowedOrigins are the browser origins ("https://app.example") accepted
	// besides the server's own, compared without regard to the case of the
	// scheme and host (http.allowed_origins). A request without Origin is
	// always accepted.
	AllowedOrigins []string
	// MaxSessions caps the sessions open at once (default 10,000;
	// --max-sessions): an initialize over it is refused with 503 and
	// Retry-After, so that clients that never end their sessions cannot
	// grow the gateway without bound before the idle TTL ends them.
	MaxSessions int
	// MaxSessionsPerClient caps the sessions one client holds at once: an
	// authenticated principal (see identity.WithCaller), else, with ClientsByAddress,
	// one remote address (see fairshare.Of). Default DefaultMaxSessionsPerClient;
	// --max-sessions-per-client; negative: no cap beyond MaxSessions. An
	// initialize of a client at its cap is refused with 429 and
	// Retry-After, so that one client cannot take every session of
	// MaxSessions and lock the others out until the idle TTL.
	MaxSessionsPerClient int
	// ClientsByAddress tells unauthenticated clients apart by the address
	// they connect from, for the per-client shares (a gateway other hosts
	// reach). Without it, as on a loopback bind, whose clients are this
	// machine's (or a local proxy's, which carries them all), an
	// unauthenticated request counts against no client's share.
	ClientsByAddress bool
	// MaxConnsPerClient caps the open connections of one remote IP under
	// Serve (default DefaultMaxConnsPerClient; --max-conns-per-address;
	// negative: no cap). Connections over the
	// cap are answered 429 at once, without reading from them, and closed,
	// except for a few kept for ProbePaths.
	MaxConnsPerClient int
	// ProbePaths are the paths (the gateway's /healthz and /readyz) a
	// client at its connection cap may still GET, on one of probeReserve
	// connections more, each closed after its answer and within
	// probeConnLife. Behind a load balancer every client's connection comes
	// from the balancer's address, and so do its health checks: without
	// these a replica whose streams fill the cap fails its checks and is
	// taken out of rotation while healthy. Other requests on such a
	// connection are answered 429 as the cap's.
	ProbePaths []string
	// MaxHeaderBytes bounds a request's headers under Serve (default
	// 64 KiB): a connection sending its headers slowly holds what arrived
	// of them until BodyReadTimeout, so the bound is what each of up to
	// MaxConnsPerClient connections per client may cost. Larger headers are
	// answered 431.
	MaxHeaderBytes int
	// BodyReadTimeout bounds the arrival of a request's headers and whole
	// body, from the request's first byte (default 30s).
	BodyReadTimeout time.Duration
	// WriteTimeout bounds each write to a client (default 30s). A client that stops reading loses its stream; it
	// never holds up anyone else.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long under Serve
	// (default 60s).
	IdleTimeout time.Duration
	// QueueSize bounds the messages waiting to be written on one stream
	// (default 256).
	QueueSize int
	// Heartbeat is the interval of SSE comment lines on open streams, which
	// keep intermediaries from closing quiet connections (default 25s). A
	// request still running after one interval, from a client that accepts
	// a stream, gets its response as a stream so that they can flow.
	Heartbeat time.Duration
	// TLS, when set, makes Serve speak HTTPS with it (serve --tls-cert);
	// the handshake is bounded like the headers' arrival.
	TLS *tls.Config
	// SessionIDPrefix starts every session id this transport issues
	// (serve --session-id-prefix), so that a load balancer that cannot
	// learn from responses can still tell which replica holds a session.
	// It is a label, not a secret: the random part follows it. Check it
	// with ValidSessionIDPrefix.
	SessionIDPrefix string
	// LeaseHere reports whether this process holds a lease of the
	// conversation name a sessionless request names in _meta (MetaLease)
	// for principal who (the zero Principal without authentication). While
	// draining, a request naming a lease held elsewhere or nowhere is
	// refused as one naming none is: serving it would start a new lease
	// here. nil: every named lease may be here.
	LeaseHere func(who identity.Principal, name string) bool
	// RateWait reports how long who must wait before a call of the tool
	// exported as tool is within its rate limits (0: now). A POST whose
	// Mcp-Method and Mcp-Name headers name a tools/call that must wait is
	// refused with 429 and Retry-After before its body is read. nil: no
	// rate limits.
	RateWait func(who identity.Principal, tool string) time.Duration
	// SessionKeys, when it holds a key ring (serve --session-key-file),
	// makes every session id carry the session's portable state sealed
	// under the ring's first key, so that any replica holding the key can
	// take the session up (http_sealed.go); an id that does not open under
	// the ring in force names no session. nil, or no ring: random ids,
	// known to this process alone.
	SessionKeys *sealed.Keys
	// SessionMaxAge is how long after its initialize a sealed id opens
	// (default DefaultSessionMaxAge; --session-max-age); after it, the
	// session's requests get 404 and the client initializes again.
	SessionMaxAge time.Duration
	// Replica names this process in the sealed ids it issues (its
	// --session-id-prefix, else its host name), for the logs and notices of
	// the replica that takes a session up.
	Replica string
}

// DefaultMaxHeaderBytes bounds a request's headers unless
// HTTPOptions.MaxHeaderBytes says otherwise: far above what MCP clients
// send (a bearer token, the Mcp-* headers), far below net/http's 1 MiB.
const DefaultMaxHeaderBytes = 64 << 10

// DefaultMaxConnsPerClient is how many connections one remote IP may hold
// open unless HTTPOptions.MaxConnsPerClient says otherwise: ample for a
// client, however many sessions it runs. A load balancer is one address
// for all the clients behind it, and needs a cap of its own.
const DefaultMaxConnsPerClient = 256

// DefaultMaxBatchBytes bounds the answers held for one batch's JSON array
// unless HTTPOptions.MaxBatchBytes says otherwise: as a stream's queue is
// bounded (maxQueuedBytes), so that one batch of a hundred calls with big
// results costs the gateway tens of MiB, not their sum.
const DefaultMaxBatchBytes = 16 << 20

// DefaultMaxSessions is how many sessions may be open at once unless
// HTTPOptions.MaxSessions says otherwise.
const DefaultMaxSessions = 10_000

// DefaultMaxSessionsPerClient is how many sessions one client may hold at once unless HTTPOptions.MaxSessionsPerClient says
// otherwise. A client opens a session per conversation or agent it runs,
// so even a busy agent host holds tens to hundreds; a thousand leaves it
// ample room while a client that leaks sessions takes at most a tenth of
// DefaultMaxSessions, so ten such clients are needed to lock the rest out.
const DefaultMaxSessionsPerClient = 1000

// withDefaults returns o with every unset field at its default.
func (o HTTPOptions) withDefaults() HTTPOptions {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.SessionIdleTTL, 30*time.Minute)
	def(&o.BodyReadTimeout, 30*time.Second)
	def(&o.WriteTimeout, 30*time.Second)
	def(&o.IdleTimeout, 60*time.Second)
	def(&o.Heartbeat, 25*time.Second)
	def(&o.SessionMaxAge, DefaultSessionMaxAge)
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBody
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	switch {
	case o.MaxConnsPerClient == 0:
		o.MaxConnsPerClient = DefaultMaxConnsPerClient
	case o.MaxConnsPerClient < 0:
		o.MaxConnsPerClient = 0 // no cap
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	switch {
	case o.MaxSessionsPerClient == 0:
		o.MaxSessionsPerClient = DefaultMaxSessionsPerClient
	case o.MaxSessionsPerClient < 0:
		o.MaxSessionsPerClient = 0 // no cap of its own
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 256
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// HTTP is the streamable-HTTP transport: the MCP endpoint for both protocol
// generations. Session-based clients (up to 2025-11-25) initialize, carry
// Mcp-Session-Id, may hold one GET stream and end with DELETE; sessionless
// clients (2026-07-28) send self-describing POSTs checked against their
// Mcp-* headers. Every request is answered by its own POST response, as one
// JSON body or as an SSE stream when the Handler sends messages ahead of
// the response.
//
// Concurrency: a Handler call runs on the goroutine serving its HTTP
// request, and reaches the response only through bounded queues
// (Request.Send and Request.Ask, Session.Notify and Session.Request), which
// never block. Each response has one writer at a time: the request's
// goroutine, or, while Handle runs and messages go out ahead of the
// response, a writer it started (serveRequest). No lock is held across a
// network write.
type HTTP struct {
	h       Handler
	opts    HTTPOptions
	log     *slog.Logger
	origins atomic.Pointer[[]string] // normalized AllowedOrigins
	maxBody atomic.Int64             // MaxBodyBytes, as reloads change it
	// maxBatch is MaxBatchBytes, as reloads change it.
	maxBatch atomic.Int64

	// ctx ends at Shutdown (cause errShutdown); every session's context, and
	// so every request's, derives from it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// mu guards the registry below. Lock order: mu before a session's mu.
	mu       sync.Mutex
	sessions map[string]*httpSession
	// aliases are the further ids of sealed sessions (reissue), each
	// naming a session of sessions.
	aliases map[string]*httpSession
	// deleted are the ids of sealed sessions ended by DELETE, with their
	// expiry (bury).
	deleted map[string]time.Time
	// perClient counts, per client (fairshare.Of), its open sessions and
	// the initializes of it being served (each holds a place until its
	// session opens or it fails), so that concurrent initializes cannot
	// pass MaxSessionsPerClient together.
	perClient fairshare.Shares
	closed    bool           // Shutdown began: nothing new is registered
	servers   []*http.Server // started by Serve
	sweeping  bool           // the idle sweeper runs
	ending    sync.WaitGroup // ended sessions whose SessionClosed has not returned

	draining atomic.Bool // Drain was called: no new sessions (http_drain.go)
	activity *activity   // requests being served, and when the last ended (InFlight, Quiet)
	beats    beats       // the requests whose responses become streams after a heartbeat interval
}

// Reasons a request's context ends, told apart by context.Cause.
var (
	errShutdown      = errors.New("the server is shutting down")
	errSessionEnded  = errors.New("the session ended")
	errCancelled     = errors.New("the client cancelled the request")
	errWriteFailed   = errors.New("writing to the client failed")
	errResponseEnded = errors.New("the response was finished")
)

// NewHTTP returns the transport serving h. Call Shutdown to end it.
func NewHTTP(h Handler, opts HTTPOptions) *HTTP {
	opts = opts.withDefaults()
	t := &HTTP{h: h, opts: opts, log: opts.Logger, sessions: make(map[string]*httpSession), aliases: make(map[string]*httpSession), deleted: make(map[string]time.Time), activity: newActivity(time.Now())}
	t.perClient.What, t.perClient.Setting = "open sessions", "--max-sessions-per-client"
	t.perClient.Frees = "end the sessions it no longer uses with DELETE (idle ones end after --session-idle-ttl)"
	t.perClient.SetMax(opts.MaxSessionsPerClient)
	t.ctx, t.cancel = context.WithCancelCause(context.Background())
	t.beats.interval, t.beats.life = opts.Heartbeat, t.ctx
	t.SetAllowedOrigins(opts.AllowedOrigins)
	t.maxBody.Store(opts.MaxBodyBytes)
	t.maxBatch.Store(opts.MaxBatchBytes)
	return t
}

// principalOf is who sent r: the principal it was authenticated as (a
// static token's client, an OAuth subject), else, with ClientsByAddress,
// the host it came from, else the local user.
func (t *HTTP) principalOf(r *http.Request) identity.Principal {
	return t.principalFrom(r, identity.CallerOf(r.Context()))
}

// principalFrom is principalOf of r, whose context carries caller.
func (t *HTTP) principalFrom(r *http.Request, caller identity.Caller) identity.Principal {
	if who := caller.Principal; who.Authenticated() {
		return who
	}
	if !t.opts.ClientsByAddress || r.RemoteAddr == "" {
		return identity.Local()
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return identity.Address(host)
	}
	return identity.Address(r.RemoteAddr)
}

// holderOf is who p's requests count against for the per-client shares:
// no one for the local user.
func holderOf(p identity.Principal) string {
	switch p.Kind {
	case identity.KindAddress:
		return fairshare.Of("", p.Name)
	case identity.KindSubject:
		return p.String()
	}
	return fairshare.Of(p.Client(), "")
}

// SetMaxBodyBytes replaces the bound on a request body (zero or less: the
// default); requests already reading their body keep the old one.
func (t *HTTP) SetMaxBodyBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxBody
	}
	t.maxBody.Store(n)
}

// SetMaxBatchBytes replaces the bound on the answers held for one batch
// (zero or less: the default); batches already being served keep the old
// one.
func (t *HTTP) SetMaxBatchBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxBatchBytes
	}
	t.maxBatch.Store(n)
}

// SetAllowedOrigins replaces the origins accepted besides the server's own;
// requests already past the check are not affected. Entries that are not an
// origin (scheme://host[:port]) are logged and ignored.
func (t *HTTP) SetAllowedOrigins(origins []string) {
	list := make([]string, 0, len(origins))
	for _, o := range origins {
		n, ok := normalizeOrigin(o)
		if !ok {
			t.log.Warn("ignoring an allowed origin that is not scheme://host[:port]", "origin", o)
			continue
		}
		list = append(list, n)
	}
	t.origins.Store(&list)
}

// Sessions reports how many sessions are open.
func (t *HTTP) Sessions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sessions)
}

// ServeHTTP serves the MCP endpoint. Mount it on a server whose WriteTimeout
// is set (Serve does): a response leaves a write deadline on its
// connection, which such a server resets for the next request.
func (t *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if t.shuttingDown(w, r) {
		return
	}
	if e := t.checkSource(r, acceptedOf(r.Context())); e != nil {
		t.refuse(w, r, e)
		return
	}
	if corsHeaders(w, r) {
		return // a browser's preflight, from an allowed origin
	}
	t.serveMethod(w, r)
}

// serveChecked is ServeHTTP for a request whose Host and Origin were
// checked, and whose CORS headers were set, before it came (Endpoint).
func (t *HTTP) serveChecked(w http.ResponseWriter, r *http.Request) {
	if !t.shuttingDown(w, r) {
		t.serveMethod(w, r)
	}
}

// shuttingDown refuses a request once Shutdown began, reporting so.
func (t *HTTP) shuttingDown(w http.ResponseWriter, r *http.Request) bool {
	if t.ctx.Err() == nil {
		return false
	}
	t.refuse(w, r, refusal(http.StatusServiceUnavailable, jsonrpc.CodeInternalError,
		"the server is shutting down; reconnect once it is back"))
	return true
}

// serveMethod serves a request that passed the checks of where it comes
// from, by its method.
func (t *HTTP) serveMethod(w http.ResponseWriter, r *http.Request) {
	if e := checkRepeated(r); e != nil {
		t.refuse(w, r, e)
		return
	}
	switch r.Method {
	case http.MethodPost:
		t.servePost(w, r)
	case http.MethodGet:
		t.serveGet(w, r)
	case http.MethodDelete:
		t.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		t.refuse(w, r, refusal(http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest,
			"method %s is not served at the MCP endpoint: use POST (and GET or DELETE with a session)", r.Method))
	}
}

// Serve runs an HTTP server on ln until Shutdown, with the timeouts of the
// options and the per-client connection cap. handler routes the MCP
// endpoint to t, beside whatever else the server offers. It closes ln and
// returns nil after Shutdown.
func (t *HTTP) Serve(ln net.Listener, handler http.Handler) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: t.opts.BodyReadTimeout,
		// One deadline, which net/http sets once per request, for the
		// headers and then the body (readBody sets none of its own:
		// serverBoundsBody). It does not cut long responses or streams:
		// net/http clears it once the body was read whole, as its watch for
		// the client going away begins (at once for a request without a
		// body). WriteTimeout gives every request a fresh write deadline;
		// the MCP endpoint then bounds each of its writes itself.
		ReadTimeout:    t.opts.BodyReadTimeout,
		MaxHeaderBytes: t.opts.MaxHeaderBytes,
		WriteTimeout:   t.opts.WriteTimeout,
		IdleTimeout:    t.opts.IdleTimeout,
		ErrorLog:       slog.NewLogLogger(t.log.Handler(), slog.LevelDebug),
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ln.Close()
	}
	t.servers = append(t.servers, srv)
	t.mu.Unlock()
	limit := newClientLimit(ln, t.opts.MaxConnsPerClient, t.log)
	srv.ConnContext = connContext
	if len(t.opts.ProbePaths) > 0 {
		limit.reserve = probeReserve
		srv.Handler = limit.probesOnly(t.opts.ProbePaths, handler)
	}
	srv.Handler = noteServed(srv.Handler)
	var served net.Listener = limit
	if t.opts.TLS != nil {
		// Outermost, so that the server sees *tls.Conn: it then bounds the
		// handshake and fills Request.TLS.
		served = tls.NewListener(served, t.opts.TLS)
	}
	err := srv.Serve(served)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the servers started by Serve from accepting, ends every
// session (cancelling its requests, closing its GET stream, then telling
// the Handler SessionClosed), ends sessionless requests and waits for all of
// it, or for ctx. Connections still open when ctx ends are closed.
func (t *HTTP) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	servers := t.servers
	open := make([]*httpSession, 0, len(t.sessions))
	for _, s := range t.sessions {
		open = append(open, s)
	}
	t.mu.Unlock()

	t.cancel(errShutdown) // ends every request, every stream and the sweeper
	for _, s := range open {
		t.endSession(s, time.Time{}, "shutdown")
	}

	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			if ctx.Err() == nil {
				errs = append(errs, err)
			}
			_ = srv.Close() // whatever is still open goes now
		}
	}
	ended := make(chan struct{})
	go func() {
		t.ending.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	return errors.Join(append(errs, ctx.Err())...)
}

// httpError is a refusal: the HTTP status and the JSON-RPC error its body
// carries, with the id of the request when it is known.
type httpError struct {
	status int
	id     []byte
	err    *jsonrpc.Error
}

func refusal(status, code int, format string, args ...any) *httpError {
	return &httpError{status: status, err: jsonrpc.Errorf(code, format, args...)}
}

// refuse answers a request the transport will not serve, with a JSON-RPC
// error body (id null where no id is known). A request whose body was not
// read closes its connection, and the server reads no more of it: draining
// an unwanted body to keep the connection would let a slow client hold it.
func (t *HTTP) refuse(w http.ResponseWriter, r *http.Request, e *httpError) {
	if r.Body != nil && r.Body != http.NoBody {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	id := e.id
	if id == nil {
		id = []byte("null")
	}
	t.log.Debug("refused a request", "method", clip(r.Method), "status", e.status, "reason", clip(e.err.Message))
	writeJSON(w, e.status, jsonrpc.Failure(id, e.err))
}

// writeJSON writes msg as a whole application/json response.
func writeJSON(w http.ResponseWriter, status int, msg *jsonrpc.Message) {
	body := msg.Encode()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Header names of the transport (mcp-go spells them once for the project).
const (
	headerSessionID   = mcp.HeaderSessionID
	headerProtocol    = mcp.HeaderProtocolVersion
	headerMethod      = mcp.HeaderMethod
	headerName        = mcp.HeaderName
	headerLastEventID = mcp.HeaderLastEventID
)
