package ops

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// Label values for calls that no catalog entry accounts for.
const (
	unknownServer = "_unknown" // the tool name is not in the catalog
	unknownTool   = "_unknown"
)

// durationBuckets cover tool calls from a local lookup to a long job; a
// tool's timeout defaults to a minute and may be longer.
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Recorder is the proxy.Observer of the gateway: it counts calls, reloads
// and restarts into its metrics and keeps the last reloads for the status
// page.
type Recorder struct {
	calls     *prometheus.CounterVec
	durations *prometheus.HistogramVec
	reloads   *prometheus.CounterVec
	restarts  *prometheus.CounterVec
	crashes   *prometheus.CounterVec
	reclaims  *prometheus.CounterVec

	// series holds each catalog entry's pre-resolved metrics, keyed by the
	// *catalog.Entry itself; each entry carries its own too (Observed), so
	// that a call finds its counters with one load. Entries the catalog no
	// longer has are pruned at scrape time, from both.
	series sync.Map // *catalog.Entry -> *toolSeries
	// mu serialises creating and pruning series, so a prune never deletes
	// the label values of a series being created.
	mu              sync.Mutex
	durationServers map[string]bool // server labels of durations; under mu
	perServer       map[string]bool // server labels of restarts, crashes and reclaims set up by sync; under mu
	// catalog, when set, lets newSeries prune series itself once they
	// outnumber what the catalog can account for, so that reloads and
	// re-lists that replace entries hold no memory between scrapes, or
	// without any. entries counts series; pruneAt is when to look next.
	catalog func() *catalog.Catalog
	entries int
	pruneAt int

	recent reloadRing
}

// toolSeries are one catalog entry's metrics. Counters per outcome are
// resolved on the outcome's first use, so tools that never fail export no
// zero error series.
type toolSeries struct {
	server, tool string
	outcomes     [5]atomic.Pointer[counter]
	duration     prometheus.Observer
}

type counter struct{ prometheus.Counter }

// NewRecorder returns a recorder keeping the last keep reloads (at least 1).
func NewRecorder(keep int) *Recorder {
	return &Recorder{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_aggregator_tool_calls_total",
			Help: "tools/call requests finished, by server, exported tool name and outcome (ok, tool_error, error, timeout, cancelled). Names no server exports count under tool=\"_unknown\".",
		}, []string{"server", "tool", "outcome"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_aggregator_tool_call_duration_seconds",
			Help:    "Time from a tools/call's arrival at the aggregator to its result, by server.",
			Buckets: durationBuckets,
		}, []string{"server"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_aggregator_reloads_total",
			Help: "Config loads applied, by outcome: ok, partial (some servers kept their last good state), rejected (a workspace-level error; nothing changed). The first load counts.",
		}, []string{"outcome"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_aggregator_upstream_restarts_total",
			Help: "Upstream instances started to replace one: a shared instance restarted after a crash or replaced over limits.max_rss, a leased instance started in place of a lost one (at its session's next call), or a leased instance recycled (lease.max_calls, lease.max_age).",
		}, []string{"server"}),
		crashes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_aggregator_upstream_crashes_total",
			Help: "Upstream instances lost unexpectedly (exited, closed the connection, or failed two pings in a row).",
		}, []string{"server"}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_aggregator_lease_reclaims_total",
			Help: "Leases ended to make room for a new session at a stateful server's lease.max_instances: each was the lease idle longest (no call in flight, none for at least 10s, its session's connection gone first), and its session is told on its next call that its state was lost.",
		}, []string{"server"}),
		recent:          reloadRing{keep: max(keep, 1)},
		pruneAt:         minPruneAt,
		durationServers: map[string]bool{},
		perServer:       map[string]bool{},
	}
}

var _ proxy.Observer = (*Recorder)(nil)

// ToolCalled counts one call. On the common path it is two atomic loads,
// one addition and one histogram observation: the entry carries its
// series (Entry.Observed).
func (r *Recorder) ToolCalled(e *catalog.Entry, outcome proxy.CallOutcome, elapsed time.Duration) {
	s := r.seriesOf(e)
	c := s.outcomes[outcome].Load()
	if c == nil {
		c = r.resolve(s, outcome)
	}
	c.Inc()
	s.duration.Observe(elapsed.Seconds())
}

// seriesOf is e's series: kept on e itself, or, for the unknown name (nil)
// and an entry another recorder keeps its own on, in series.
func (r *Recorder) seriesOf(e *catalog.Entry) *toolSeries {
	if e != nil {
		if s, ok := e.Observed(r).(*toolSeries); ok {
			return s
		}
	}
	if v, ok := r.series.Load(e); ok {
		return v.(*toolSeries)
	}
	return r.newSeries(e)
}

// newSeries resolves the metrics of an entry seen for the first time (nil:
// a name no server exports).
func (r *Recorder) newSeries(e *catalog.Entry) *toolSeries {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.series.Load(e); ok {
		return v.(*toolSeries)
	}
	s := &toolSeries{server: unknownServer, tool: unknownTool}
	if e != nil {
		s.server, s.tool = e.Server, e.Exported
	}
	s.duration = r.durations.WithLabelValues(s.server)
	r.durationServers[s.server] = true
	if r.catalog != nil && r.entries >= r.pruneAt {
		r.prune(r.catalog())
	}
	r.series.Store(e, s)
	if e != nil {
		e.Observe(r, s)
	}
	r.entries++
	return s
}

// minPruneAt is the fewest series at which newSeries prunes.
const minPruneAt = 256

func (r *Recorder) resolve(s *toolSeries, outcome proxy.CallOutcome) *counter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := s.outcomes[outcome].Load(); c != nil {
		return c
	}
	c := &counter{r.calls.WithLabelValues(s.server, s.tool, outcome.String())}
	s.outcomes[outcome].Store(c)
	return c
}

// sync makes the per-server series follow the config before a scrape:
// every configured server has its restart, crash and reclaim counters, even at
// zero, and the series of tools cat no longer exports and of servers gone
// are dropped, which keeps the label sets bounded by the catalog and the
// config however often they change.
func (r *Recorder) sync(cat *catalog.Catalog, configured []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[string]bool{}
	for _, s := range configured {
		want[s] = true
		if !r.perServer[s] {
			r.restarts.WithLabelValues(s)
			r.crashes.WithLabelValues(s)
			r.reclaims.WithLabelValues(s)
			r.perServer[s] = true
		}
	}
	for s := range r.perServer {
		if !want[s] {
			r.restarts.DeleteLabelValues(s)
			r.crashes.DeleteLabelValues(s)
			r.reclaims.DeleteLabelValues(s)
			delete(r.perServer, s)
		}
	}
	r.prune(cat)
}

// prune drops the series of tools cat no longer exports. Callers hold mu.
func (r *Recorder) prune(cat *catalog.Catalog) {
	servers := map[string]bool{unknownServer: true}
	for _, e := range cat.Entries() {
		servers[e.Server] = true
	}
	r.series.Range(func(k, v any) bool {
		e, s := k.(*catalog.Entry), v.(*toolSeries)
		if e == nil {
			return true
		}
		if cur, ok := cat.Lookup(e.Exported); ok && cur == e {
			return true
		}
		r.series.Delete(e)
		e.Observe(r, nil)
		r.entries--
		if cur, ok := cat.Lookup(e.Exported); ok && cur.Server == e.Server {
			// The same server still exports the name: a newer entry shares
			// the label values, so they stay.
			return true
		}
		r.calls.DeletePartialMatch(prometheus.Labels{"server": s.server, "tool": s.tool})
		return true
	})
	// Pruned again once the series have doubled: amortised, a call pays
	// nothing for it.
	r.pruneAt = max(2*r.entries, minPruneAt)
	// A server gone from the catalog takes its durations along.
	for sv := range r.durationServers {
		if !servers[sv] {
			r.durations.DeleteLabelValues(sv)
			delete(r.durationServers, sv)
		}
	}
}

// Reloaded counts a reload and keeps it for the status page.
func (r *Recorder) Reloaded(rl proxy.Reload) {
	r.reloads.WithLabelValues(rl.Outcome).Inc()
	r.recent.add(rl)
}

// InstanceEvent counts restarts, crashes and reclaimed leases.
func (r *Recorder) InstanceEvent(server, kind string) {
	switch kind {
	case "restarted", "replaced", "recycled":
		r.restarts.WithLabelValues(server).Inc()
	case "lost":
		r.crashes.WithLabelValues(server).Inc()
	case "reclaimed":
		r.reclaims.WithLabelValues(server).Inc()
	}
}

// Reloads returns the kept reloads, newest first.
func (r *Recorder) Reloads() []proxy.Reload { return r.recent.list() }

// reloadRing keeps the last keep reloads.
type reloadRing struct {
	mu   sync.Mutex
	keep int
	ring []proxy.Reload
	next int
}

func (g *reloadRing) add(rl proxy.Reload) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ring) < g.keep {
		g.ring = append(g.ring, rl)
		return
	}
	g.ring[g.next] = rl
	g.next = (g.next + 1) % g.keep
}

func (g *reloadRing) list() []proxy.Reload {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]proxy.Reload, 0, len(g.ring))
	for i := len(g.ring) - 1; i >= 0; i-- {
		out = append(out, g.ring[(g.next+i)%len(g.ring)])
	}
	return out
}
