package downstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"

	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// readBody reads a POST body within the size and time bounds. A declared
// length over the bound is refused before a byte is read. conn is the
// connection r arrived on, when known (connOf).
func (t *HTTP) readBody(w http.ResponseWriter, r *http.Request, conn *countedConn) ([]byte, *httpError) {
	limit := t.maxBody.Load()
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	rc := http.NewResponseController(w)
	bounded := conn != nil || t.serverBoundsBody(r) // a connection of Serve's server
	if !bounded {
		_ = rc.SetReadDeadline(time.Now().Add(t.opts.BodyReadTimeout))
	}
	body, err := readAtMost(t.limitBody(w, r, limit), r.ContentLength)
	switch {
	case err == nil:
		if !bounded {
			// A read deadline left in place would end the connection's watch
			// for the client going away, and with it a long response.
			_ = rc.SetReadDeadline(time.Time{})
		}
		// Read whole: the connection may be kept. The server, which looks
		// for what is left of a body before the response as full duplex
		// does not, would otherwise read the body again to find it empty.
		_ = rc.EnableFullDuplex()
		r.Body = http.NoBody
		return body, nil
	case isTooBig(err):
		return nil, tooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, refusal(http.StatusRequestTimeout, jsonrpc.CodeInvalidRequest,
			"the request body did not arrive within %s: send the whole body at once",
			t.opts.BodyReadTimeout)
	default:
		return nil, refusal(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "the request body could not be read: %v", err)
	}
}

// serverBoundsBody reports whether the server r came through bounds the
// arrival of its body within BodyReadTimeout itself: a server of Serve,
// whose ReadTimeout is one deadline for the headers and the body, which
// net/http clears once the body was read whole. A request of any other
// server gets a deadline for its body from readBody.
func (t *HTTP) serverBoundsBody(r *http.Request) bool {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	return srv != nil && srv.ReadTimeout > 0 && srv.ReadTimeout <= t.opts.BodyReadTimeout
}

// limitBody is r's body bounded by limit. A declared length (readBody
// refused one over the limit) already bounds what net/http reads of the
// body; a body of unknown length (chunked) is read through
// http.MaxBytesReader, which also tells the server to close the connection
// once the limit is passed.
func (t *HTTP) limitBody(w http.ResponseWriter, r *http.Request, limit int64) io.Reader {
	if r.ContentLength >= 0 {
		return r.Body
	}
	return http.MaxBytesReader(w, r.Body, limit)
}

// isTooBig reports whether err is http.MaxBytesReader's: the body passed
// its limit. (The target lives here, off the path of a body read whole.)
func isTooBig(err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig)
}

// eagerBody is the largest declared body allocated whole before it has
// arrived. A larger one is read in chunks as its bytes come, so that a
// client declaring the cap and sending a byte holds a chunk of memory, not
// the cap, for as long as its body may take.
const eagerBody = 256 << 10

// bodyChunk is the size of the pieces a body of unknown or large length is
// read in.
const bodyChunk = 64 << 10

// readAtMost reads a body without the doubling a growing buffer costs: a
// small declared length is allocated once; otherwise the body is read in
// chunks as it arrives and joined at the end, so what a body holds is in
// proportion to what arrived, and a body refused at the cap has cost one
// cap.
func readAtMost(r io.Reader, declared int64) ([]byte, error) {
	if declared >= 0 && declared <= eagerBody {
		// One byte more, for the read that must find the end: a byte of its
		// own would escape through the reader and cost an allocation.
		buf := make([]byte, declared+1)
		body := buf[:declared:declared]
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		if err := atEnd(r, buf[declared:]); err != nil {
			return nil, err
		}
		return body, nil
	}
	var chunks [][]byte
	total := 0
	for {
		buf := make([]byte, bodyChunk)
		n, err := fill(r, buf)
		if n > 0 {
			chunks = append(chunks, buf[:n])
			total += n
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if declared >= 0 && int64(total) != declared {
		return nil, io.ErrUnexpectedEOF
	}
	body := make([]byte, 0, total)
	for _, c := range chunks {
		body = append(body, c...)
	}
	return body, nil
}

// fill reads into buf until it is full or r fails; io.EOF is r's own end.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// atEnd reports an error when r has more than its declared length: nothing
// may follow it. one is a byte to read into.
func atEnd(r io.Reader, one []byte) error {
	n, err := r.Read(one)
	switch {
	case n > 0:
		return errors.New("the body is longer than its Content-Length")
	case err != nil && !errors.Is(err, io.EOF):
		return err
	}
	return nil
}

func tooLarge(limit int64) *httpError {
	return refusal(http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest,
		"the request body exceeds %d bytes (http.max_body_bytes): send a smaller message or raise the limit", limit)
}

// clientLimit is a listener that holds each remote IP to a number of open
// connections. A connection over the cap is answered 429 and closed at
// once: it costs no goroutine and is never read from, so a flood of them
// cannot hold server resources. The first reserve connections over the cap
// are served instead, for probes only (probesOnly), and briefly.
type clientLimit struct {
	net.Listener
	max     int // 0: no cap
	reserve int // probe connections an IP may open over max
	log     *slog.Logger

	mu      sync.Mutex
	open    map[string]int // remote IP -> open connections
	probing map[string]int // remote IP -> open probe connections over max
	refused int            // connections refused since the last log line
	logged  time.Time      // when that line was written
}

// probeReserve is how many connections over its cap an address may open
// for probes: a load balancer checks a replica once per interval, a
// kubelet runs a liveness and a readiness probe.
const probeReserve = 4

// probeConnLife bounds a probe connection over the cap from its accept to
// its close, so that connections that never send their request cannot
// hold the reserve for the header timeout.
const probeConnLife = 5 * time.Second

func newClientLimit(ln net.Listener, max int, log *slog.Logger) *clientLimit {
	return &clientLimit{Listener: ln, max: max, log: log, open: make(map[string]int), probing: make(map[string]int)}
}

// Accept returns the next connection within its client's cap.
func (l *clientLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		over := l.max > 0 && l.open[ip] >= l.max
		probe := over && l.probing[ip] < l.reserve
		switch {
		case !over:
			l.open[ip]++
		case probe:
			l.probing[ip]++
		}
		l.mu.Unlock()
		switch {
		case !over:
			return &countedConn{Conn: pipeio.NewConn(c), release: func() { l.release(l.open, ip) }, loopback: loopbackAddr(c.LocalAddr())}, nil
		case probe:
			until := time.Now().Add(probeConnLife)
			pc := &probeConn{countedConn: countedConn{Conn: pipeio.NewConn(c), release: func() { l.release(l.probing, ip) }, loopback: loopbackAddr(c.LocalAddr()), probe: true}, until: until}
			_ = pc.SetDeadline(until)
			return pc, nil
		}
		l.noteRefused(ip)
		l.refuse(c)
	}
}

// noteRefused logs refused connections: one line per interval, however
// hard a client pushes.
func (l *clientLimit) noteRefused(ip string) {
	l.mu.Lock()
	refused := 0
	if l.refused++; time.Since(l.logged) >= 10*time.Second {
		refused, l.refused, l.logged = l.refused, 0, time.Now()
	}
	l.mu.Unlock()
	if refused > 0 {
		l.log.Warn("refused connections over the per-client cap", "client", ip, "max", l.max, "refused", refused,
			"fix", "if this address is a load balancer or proxy that carries many clients, raise --max-conns-per-address")
	}
}

// release gives back a slot of ip in counts (open or probing).
func (l *clientLimit) release(counts map[string]int, ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if counts[ip]--; counts[ip] <= 0 {
		delete(counts, ip)
	}
}

// connKey carries, in the context of a request under Serve, the
// connection it arrived on (acceptedOf): one value for what every request
// asks of it.
type connKey struct{}

// connContext is the server's ConnContext: it gives requests their
// connection (under TLS, the connection inside).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	switch c := c.(type) {
	case *probeConn:
		return context.WithValue(ctx, connKey{}, &c.countedConn)
	case *countedConn:
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// acceptedOf is the connection a request arrived on under Serve, probe
// connections included; nil if none is known.
func acceptedOf(ctx context.Context) *countedConn {
	c, _ := ctx.Value(connKey{}).(*countedConn)
	return c
}

// connOf is the connection a request arrived on under Serve within its
// client's cap (not a probe connection), nil if none is known.
func connOf(ctx context.Context) *countedConn {
	if c := acceptedOf(ctx); c != nil && !c.probe {
		return c
	}
	return nil
}

// probesOnly serves a request on a probe connection only when it is a GET
// or HEAD of one of paths, and closes the connection after the answer; any
// other is answered as the connection cap answers.
func (l *clientLimit) probesOnly(paths []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := acceptedOf(r.Context()); c == nil || !c.probe {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && slices.Contains(paths, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		l.noteRefused(remoteHost(r.RemoteAddr))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(l.refusal())
	})
}

func remoteHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// refusal is the body of a connection refused over the cap.
func (l *clientLimit) refusal() []byte {
	return jsonrpc.Failure([]byte("null"), jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
		"too many connections from this address: at most %d; reuse or close connections", l.max)).Encode()
}

// refuse writes a short 429 response and closes c. The response fits in a
// fresh connection's send buffer, so the write does not wait for the
// client; the deadline covers the case where it would.
func (l *clientLimit) refuse(c net.Conn) {
	body := l.refusal()
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	_ = c.Close()
}

func remoteIP(c net.Conn) string {
	if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// countedConn gives its slot back to the listener when closed, and
// remembers the write deadline last set on it (writeDeadline).
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
	// deadline is the write deadline last set, in Unix nanoseconds (0:
	// none).
	deadline atomic.Int64
	// loopback: the connection was accepted on a loopback address
	// (checkHost); probe: it is one of a client's probe connections over
	// its cap (probesOnly).
	loopback, probe bool

	// watchMu guards watcher, the cancel of the request being served
	// (watch), and gone: a read found the client gone.
	watchMu sync.Mutex
	watcher context.CancelCauseFunc
	gone    bool
	// served is the context net/http made for the request of HTTP/1.x
	// being served, without TLS (noteServed): what ends it is the
	// connection, and the server, whose BaseContext Serve leaves unset.
	// Only the goroutine serving the request uses it.
	served context.Context
}

// noteServed leaves on its connection the context net/http made for each
// request of HTTP/1.x on a connection of Serve, without TLS, while next
// serves it (countedConn.endsAsServed).
func noteServed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := acceptedOf(r.Context())
		if c == nil || r.TLS != nil || r.ProtoMajor != 1 {
			next.ServeHTTP(w, r)
			return
		}
		c.served = r.Context()
		next.ServeHTTP(w, r)
		c.served = nil
	})
}

// endsAsServed reports whether ctx, the context of the request being
// served on c, ends only as the one net/http made for it ends: it is that
// context, or one that adds values to it, whose Done is that context's. A
// handler in front that narrows it (a cancel or a deadline of its own)
// gives it a Done of its own.
func (c *countedConn) endsAsServed(ctx context.Context) bool {
	served := c.served
	return served != nil && (ctx == served || ctx.Done() == served.Done())
}

// Read reads from the client. A read that fails other than by a deadline
// finds the client gone (or the connection closed), as the server's own
// watch does when it ends the request's context: it ends the request
// being served (watch).
func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && !isTimeout(err) {
		c.watchMu.Lock()
		cancel := c.watcher
		c.gone, c.watcher = true, nil
		c.watchMu.Unlock()
		if cancel != nil {
			cancel(context.Canceled) // the cause the server's cancellation gives
		}
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// watch has cancel end the request being served on c when a read finds
// the client gone, until unwatch; false when one already has. A
// connection of HTTP/1.x serves one request at a time: the server reads
// from it while a request is served only to watch for the client leaving.
func (c *countedConn) watch(cancel context.CancelCauseFunc) bool {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.gone {
		return false
	}
	c.watcher = cancel
	return true
}

func (c *countedConn) unwatch() {
	c.watchMu.Lock()
	c.watcher = nil
	c.watchMu.Unlock()
}

// SetDeadline sets both deadlines, remembering the one of writes.
func (c *countedConn) SetDeadline(t time.Time) error {
	c.noteWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline sets the write deadline, and remembers it.
func (c *countedConn) SetWriteDeadline(t time.Time) error {
	c.noteWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *countedConn) noteWriteDeadline(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	c.deadline.Store(ns)
}

// writeDeadline is the write deadline in place (zero: none), so that a
// response can keep one that leaves it time enough instead of setting its
// own (responseStream.raw).
func (c *countedConn) writeDeadline() time.Time {
	if ns := c.deadline.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// probeConn is a connection over its client's cap served for a probe: no
// deadline the server sets reaches past until.
type probeConn struct {
	countedConn
	until time.Time
}

func (c *probeConn) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(c.until) {
		return c.until
	}
	return t
}

func (c *probeConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *probeConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.clamp(t))
}
func (c *probeConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}
