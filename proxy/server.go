package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Options are a Proxy's dependencies.
type Options struct {
	Logger  *slog.Logger
	Version string
	// Upstream is the template for every instance started (grace periods).
	Upstream upstream.Options
	// HTTPSessionIdleTTL expires HTTP sessions abandoned without DELETE;
	// zero means 30 minutes.
	HTTPSessionIdleTTL time.Duration
	// StdioWorkers is how many stdio requests run at once; zero means the
	// most mcp-go allows (100).
	StdioWorkers int
}

// Proxy is the aggregator's downstream MCP server.
type Proxy struct {
	opts     Options
	log      *slog.Logger
	mcp      *server.MCPServer
	raw      *rawStore
	http     *httpEdge // the HTTP edge's own state; in use once HTTPHandler is
	progress *progressTracker
	catalog  atomic.Pointer[Catalog]
	version  atomic.Uint64

	reloadMu sync.Mutex // one reconcile at a time

	mu       sync.RWMutex
	servers  map[string]*runningServer
	failed   map[string]string // servers in the config with no running instance: why
	problems []config.Problem  // from the last reload
	admin    config.Admin
	pattern  string // naming.valid_pattern of the last good config
	limits   *limiter

	retiring   sync.WaitGroup // removed or replaced servers still draining
	anonWarned atomic.Bool
	loaded     chan struct{} // closed once the first config load is committed
	loadedOnce sync.Once
	stop       chan struct{}
	stopOnce   sync.Once
}

// New builds a Proxy with an empty catalog; Reconcile fills it.
func New(opts Options) *Proxy {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Upstream.Logger == nil {
		opts.Upstream.Logger = opts.Logger
	}
	p := &Proxy{opts: opts, log: opts.Logger, servers: map[string]*runningServer{}, failed: map[string]string{},
		admin: config.Admin{Enabled: true, LeaseReminder: true}, limits: newLimiter(0), stop: make(chan struct{}),
		loaded: make(chan struct{})}
	p.catalog.Store(emptyCatalog())
	p.raw = newRawStore(p.Catalog)
	p.http = &httpEdge{p: p}
	p.progress = newProgressTracker()

	hooks := &server.Hooks{}
	hooks.AddBeforeCallTool(func(ctx context.Context, _ any, _ *mcp.CallToolRequest) {
		p.awaitLoad(ctx) // a call made right after initialize finds its tool
	})
	hooks.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		// A client that lists right after initialize should see the
		// servers that start promptly, not an empty catalog; slow ones
		// arrive later with tools/list_changed.
		p.awaitLoad(ctx)
		// The real list is spliced in by the edge writer (see edge.go).
		res.Tools = []mcp.Tool{}
		res.NextCursor = ""
		token, _ := json.Marshal(p.raw.put(rawToolList, nil))
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{rawMarker: json.RawMessage(token)}}
	})
	hooks.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) {
		p.http.sessionStarted(s.SessionID())
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) {
		p.http.sessionEnded(s.SessionID())
		p.sessionEnded(sessionKey(s.SessionID()))
	})
	p.mcp = server.NewMCPServer("mcp-aggregator", opts.Version,
		server.WithToolCapabilities(true),
		server.WithHooks(hooks),
		server.WithRecovery(),
	)
	p.installAdmin()
	go p.sweep()
	return p
}

// firstListWait bounds how long a tools/list or tools/call waits for the
// first config load to finish; servers slower than that arrive later with
// tools/list_changed.
const firstListWait = 3 * time.Second

func (p *Proxy) awaitLoad(ctx context.Context) {
	select {
	case <-p.loaded:
		return // the common case: no timer
	default:
	}
	t := time.NewTimer(firstListWait)
	defer t.Stop()
	select {
	case <-p.loaded:
	case <-ctx.Done():
	case <-t.C:
	}
}

// MarkLoaded tells the proxy the first config load is done.
func (p *Proxy) MarkLoaded() { p.loadedOnce.Do(func() { close(p.loaded) }) }

// Catalog returns the current exported catalog.
func (p *Proxy) Catalog() *Catalog { return p.catalog.Load() }

// Version is the registry version: the number of commits that changed the catalog.
func (p *Proxy) Version() uint64 { return p.version.Load() }

func (p *Proxy) sweep() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.raw.sweep(2 * time.Minute)
		}
	}
}

// ServeStdio serves one downstream client on in/out until in ends or ctx is done.
func (p *Proxy) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(p.mcp)
	workers := p.opts.StdioWorkers
	if workers <= 0 {
		workers = 100
	}
	// mcp-go runs 5 requests at once by default; the aggregator must never
	// be the bottleneck between an agent and its upstreams.
	server.WithWorkerPoolSize(workers)(s)
	server.WithQueueSize(workers * 4)(s)
	s.SetErrorLogger(log.New(slogWriter{p.log}, "", 0))
	w := &lineWriter{store: p.raw, progress: p.progress, out: out}
	edge := &stdioEdge{p: p, w: w, calls: map[string]context.CancelFunc{}, workers: callWorkers{idle: make(chan func())}}
	fromEdge, toMCP := io.Pipe()
	go edge.pump(ctx, in, toMCP)
	return s.Listen(ctx, fromEdge, w)
}

// HTTPHandler serves streamable HTTP at path (mcp-go keeps its Host/Origin
// checks against DNS rebinding).
func (p *Proxy) HTTPHandler(path string) (http.Handler, func(context.Context) error) {
	ttl := p.opts.HTTPSessionIdleTTL
	if ttl == 0 {
		ttl = 30 * time.Minute
	}
	h := server.NewStreamableHTTPServer(p.mcp,
		server.WithEndpointPath(path),
		server.WithSessionIdleTTL(ttl),
		// A GET stream counts as activity only when something is written on
		// it; heartbeats keep live but quiet streams from being swept as
		// abandoned sessions.
		server.WithHeartbeatInterval(max(ttl/3, time.Second)),
		server.WithStreamableHTTPLogger(p.log),
	)
	p.http.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&httpWriter{ResponseWriter: w, store: p.raw, progress: p.progress}, r)
	})
	p.http.touchGap = max(ttl/4, time.Second)
	return p.http, h.Shutdown
}

// Close stops every server, waiting up to ctx for in-flight calls.
func (p *Proxy) Close(ctx context.Context) {
	p.stopOnce.Do(func() { close(p.stop) })
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	p.mu.Lock()
	servers := p.servers
	p.servers = map[string]*runningServer{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, rs := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); rs.pool.Close(ctx) }()
	}
	wg.Wait()
	p.retiring.Wait() // bounded by drainTimeout, then their instances are closed
}

// slogWriter adapts mcp-go's *log.Logger output to slog.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(b []byte) (int, error) {
	w.log.Warn("downstream transport", "detail", string(trimNL(b)))
	return len(b), nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
