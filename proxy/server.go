package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/audit"
	"github.com/mcp-aggregator/mcp-aggregator/bridge"
	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/internal/resultcache"
	"github.com/mcp-aggregator/mcp-aggregator/internal/telemetry"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// Options are a Proxy's dependencies.
type Options struct {
	Logger  *slog.Logger
	Version string
	// Upstream is the template for every instance started (grace periods).
	Upstream upstream.Options
	// OnWorkspace, when set, is given every valid workspace a reconcile
	// applies, so that the transports can follow its http settings.
	OnWorkspace func(*config.Workspace)
	// OnStartFailed, when set, is given the problem of each server whose
	// start fails in a reconcile, as soon as it fails: the reconcile itself
	// may go on for up to another server's connect_timeout. The problem is
	// in the reconcile's Report too (Report.StartFailed).
	OnStartFailed func(config.Problem)
	// AuthProblems, when set, gives the problems of upstream
	// authorization found while running (a refresh token the issuer
	// refused); they show with the config's in Problems and mcp_status.
	AuthProblems func() []config.Problem
	// OfferLogin, when set, lets a client that declared URL-mode
	// elicitation finish a server's login itself: a call that fails for
	// want of one answers with the authorization URL (-32042).
	OfferLogin LoginOffer
	// Observer, when set, is told about calls, reloads and instance
	// changes (metrics, the status page).
	Observer Observer
	// Tracer records a span per downstream request and per upstream call,
	// and passes trace context on in _meta; nil (tracing off) costs one
	// nil check per request.
	Tracer *telemetry.Tracer
	// ReloadDrain bounds how long the calls in flight on a server that a
	// reload removed or changed may run before its instances are closed
	// regardless; 0 means drainTimeout.
	ReloadDrain time.Duration
	// MaxTasksPerClient and MaxLeasesPerClient are the per-client shares
	// of the task table and of each leased server's instances
	// (--max-tasks-per-client, --max-leases-per-client), counted by
	// downstream.Request.Holder; 0 sets no cap of their own.
	MaxTasksPerClient, MaxLeasesPerClient int
	// MaxCallsPerClient is one client's share of limits.max_concurrent
	// (--max-calls-per-client): the calls it may have in flight at once,
	// counted by downstream.Request.Holder; its further calls wait for one
	// of its own to end. DefaultMaxCallsPerClient (-1) is half of
	// limits.max_concurrent; 0 sets no share of its own.
	MaxCallsPerClient int
}

// DefaultMaxTasksPerClient is how many tasks one client may hold across
// its sessions unless Options.MaxTasksPerClient says otherwise: as many as
// one session may, a tenth of the table's maxTasks.
const DefaultMaxTasksPerClient = tasks.MaxSessionTasks

// DefaultMaxLeasesPerClient, as Options.MaxLeasesPerClient, gives one
// client at most half of each leased server's lease.max_instances (rounded
// up; none of its own where that cap is 0), so that one client (a
// sessionless one naming a lease per call, or one opening session after
// session) leaves the other half to the rest.
const DefaultMaxLeasesPerClient = -1

// DefaultMaxCallsPerClient, as Options.MaxCallsPerClient, gives one
// client at most half of limits.max_concurrent (rounded up) in flight at
// once, so that a client running many slow calls leaves the other half to
// the rest, whose calls then start at once rather than after its slowest.
const DefaultMaxCallsPerClient = -1

// callsPerClient is the share of maxConcurrent slots one client may hold at
// once: Options.MaxCallsPerClient, or by default half of maxConcurrent; 0 is
// no share of the client's own.
func (p *Proxy) callsPerClient(maxConcurrent int) int {
	if n := p.opts.MaxCallsPerClient; n >= 0 {
		return n
	}
	return (maxConcurrent + 1) / 2
}

// leasesPerClient is the share of server s's instances one client may
// lease at once: Options.MaxLeasesPerClient, or by default half of the
// server's lease.max_instances; 0 is no cap of the client's own.
func (p *Proxy) leasesPerClient(s *config.Server) int {
	if n := p.opts.MaxLeasesPerClient; n >= 0 {
		return n
	}
	return (s.Lease.MaxInstances + 1) / 2
}

// Proxy is the aggregator's downstream MCP server: the Handler every
// downstream transport serves.
type Proxy struct {
	opts    Options
	log     *slog.Logger
	state   atomic.Pointer[state]
	version atomic.Uint64
	commits commitSignal // closed on every commit of a new state

	// audit is the audit log, nil when none is set (audit.go); auditMu
	// orders its replacements, auditDropped counts the drops of closed ones.
	audit        atomic.Pointer[audit.Log]
	auditMu      sync.Mutex
	auditDropped atomic.Uint64

	reloadMu    sync.Mutex // one commit (of a reconcile, relist or problems update) at a time; never held while an upstream starts
	reconcileMu sync.Mutex // one reconcile at a time, starts included

	sessions   sessions          // every downstream session's Session, which holds what is kept for it alone (session.go)
	clients    clients           // listen streams, and who hears of catalog changes
	inflight   inflight          // downstream requests running on each instance
	subOrder   subscriptionOrder // one subscribe/unsubscribe decision at a time per shared server and URI
	tasks      tasks.Table       // the task ids clients see, mapped to the upstreams'
	taskInputs taskInputs        // what bridged tasks of the tasks extension ask their clients (bridgedinput.go)
	relists    relists           // per-server coalescing of upstream list_changed
	notes      upstreamNotes     // notifications clients cause upstream, written off their reader goroutines
	retiring   sync.WaitGroup
	starting   starts          // servers a reconcile is starting, for Supersede
	ledger     *session.Ledger // every upstream instance, across servers and reloads
	anonWarned atomic.Bool
	results    *resultcache.Cache    // results fresh by their caching hints (cache.go)
	cachedFrom sync.Map              // *upstream.Instance with results in the cache -> struct{}
	hidden     hiddenNames           // log lines about names a client's profile hides (hidden.go)
	views      atomic.Pointer[views] // lists of clients with a profile, for the current state
	bridge     bridge.Bridge         // requests of 2026-07-28 clients held while their upstream awaits input
	loaded     chan struct{}         // closed once the first config load is committed
	loadedOnce sync.Once
	closed     atomic.Bool
	// serverInfoJSON is the aggregator's identity as every 2026-07-28
	// result carries it.
	serverInfoJSON json.RawMessage
	// modernEdits are what encode does to a 2026-07-28 result (resultEdits).
	modernEdits [4]rawjson.Edit
	// life ends when a Close's drain time is up: retiring servers then stop
	// waiting for their calls.
	life    context.Context
	endLife context.CancelFunc
}

var _ downstream.Handler = (*Proxy)(nil)

// New builds a Proxy with an empty catalog; Reconcile fills it.
func New(opts Options) *Proxy {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Upstream.Logger == nil {
		opts.Upstream.Logger = opts.Logger
	}
	p := &Proxy{opts: opts, log: opts.Logger, loaded: make(chan struct{}), ledger: session.NewLedger()}
	p.tasks.LimitPerClient(opts.MaxTasksPerClient)
	p.results = resultcache.New(0, config.DefaultCacheMaxBytes) // cache.max_bytes, set by each reconcile
	p.serverInfoJSON, _ = rawjson.Marshal(p.serverInfo())
	p.modernEdits = resultEdits(p.serverInfoJSON)
	p.life, p.endLife = context.WithCancel(context.Background())
	st := initialState()
	st.catalog = withAdmin(st.catalog, adminEntries(st.admin))
	st.catalog.Render()
	p.state.Store(st)
	p.sessions.p = p
	p.clients.init(&p.sessions)
	p.relists.init()
	if err := p.bridge.Init(p.bridgeConfig()); err != nil {
		p.log.Error("no requestState key: 2026-07-28 clients cannot answer an upstream's requests for input", "err", err)
	}
	return p
}

// firstListWait bounds how long a tools/list or tools/call waits for the
// first config load to finish; servers slower than that arrive later with
// tools/list_changed. initialize never waits (see offerable).
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
func (p *Proxy) MarkLoaded() {
	p.loadedOnce.Do(func() {
		p.clients.first.finish()
		close(p.loaded)
	})
}

// Loaded is closed once the first config load is done.
func (p *Proxy) Loaded() <-chan struct{} { return p.loaded }

// Catalog returns the current exported catalog.
func (p *Proxy) Catalog() *catalog.Catalog { return p.current().catalog }

// Version is the registry version: the number of commits that changed the catalog.
func (p *Proxy) Version() uint64 { return p.version.Load() }

// ServeStdio serves one downstream client on in/out until in ends or ctx is
// done.
func (p *Proxy) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return downstream.ServeStdio(ctx, p, in, out, downstream.StdioOptions{Logger: p.log})
}

// EndListeners ends every subscriptions/listen stream with its final
// result, as Close does first: a gateway that stops calls it before its
// HTTP server cancels what is left, so that the streams end gracefully.
func (p *Proxy) EndListeners() { p.clients.endListeners() }

// closeBudget is the part of a shutdown grace kept for closing instances
// (close stdin, SIGTERM, SIGKILL) after in-flight calls had their time.
const closeBudget = 5 * time.Second

// Close stops every server. In-flight calls may finish until ctx's deadline
// less closeBudget; then every instance, running or retiring, is closed, so
// that nothing is left when ctx ends.
func (p *Proxy) Close(ctx context.Context) {
	p.closed.Store(true)
	defer p.closeAudit()
	// Starts under way are given up: what they would start, nobody would
	// serve. The reconcile waiting for them commits nothing from now on.
	p.starting.abandonAll(errClosing)
	p.clients.endListeners()
	p.bridge.Close()
	drain := ctx
	if d, ok := ctx.Deadline(); ok && time.Until(d) > 2*closeBudget {
		var cancel context.CancelFunc
		drain, cancel = context.WithDeadline(ctx, d.Add(-closeBudget))
		defer cancel()
	}
	stop := context.AfterFunc(drain, p.endLife)
	defer stop()
	p.closeServers(drain)
	p.endLife()
	p.retiring.Wait() // their drain ended with life; closing is bounded by the instances' graces
	// A reconcile under way commits nothing now, and its starts were
	// abandoned: it ends soon, closing what it started. Waited for within
	// ctx, and without reloadMu, which it needs to end.
	reconciled := make(chan struct{})
	go func() {
		p.reconcileMu.Lock()
		p.reconcileMu.Unlock()
		close(reconciled)
	}()
	select {
	case <-reconciled:
	case <-ctx.Done():
	}
}

// closeServers unpublishes every server and closes it, its calls allowed
// until drain ends.
func (p *Proxy) closeServers(drain context.Context) {
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	st := p.current()
	next := st.with()
	next.servers = map[string]*runningServer{}
	p.publish(next)
	var wg sync.WaitGroup
	for _, rs := range st.servers {
		wg.Add(1)
		go func() { defer wg.Done(); rs.pool.Close(drain) }()
	}
	wg.Wait()
}
