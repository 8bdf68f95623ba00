package ops

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// Options are what the operations endpoints need besides the proxy.
type Options struct {
	Logger  *slog.Logger
	Version string // the binary's, shown on the status page and in build_info
	// Secrets are scrubbed from every text the status shows (health lines,
	// problems); nil shows them as they are.
	Secrets *redact.Set
	// Draining reports whether the replica drains (no new sessions); nil
	// never does. While it does, /readyz fails and says so.
	Draining func() bool
}

// Ops serves the operations endpoints of one proxy.
type Ops struct {
	proxy    *proxy.Proxy
	rec      *Recorder
	opts     Options
	started  time.Time
	registry *prometheus.Registry
	metrics  http.Handler
}

// scrapeTimeout bounds one /metrics answer; concurrent scrapes beyond
// maxScrapes get 503 instead of piling up.
const (
	scrapeTimeout = 10 * time.Second
	maxScrapes    = 4
)

// New returns the endpoints of p, whose Options.Observer is rec.
func New(p *proxy.Proxy, rec *Recorder, opts Options) *Ops {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	o := &Ops{proxy: p, rec: rec, opts: opts, started: time.Now(), registry: prometheus.NewRegistry()}
	rec.mu.Lock()
	rec.catalog = p.Catalog
	rec.mu.Unlock()
	o.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		rec.calls, rec.durations, rec.reloads, rec.restarts, rec.crashes, rec.reclaims,
		&stateCollector{o: o}, &cacheCollector{o: o},
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mcp_aggregator_audit_dropped_total",
			Help: "Audit log records dropped because the writer could not keep up.",
		}, func() float64 { return float64(p.AuditDropped()) }),
	)
	o.metrics = promhttp.HandlerFor(o.registry, promhttp.HandlerOpts{
		ErrorLog:            errorLog{opts.Logger},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: maxScrapes,
		Timeout:             scrapeTimeout,
	})
	return o
}

// Registry is the private registry /metrics exposes.
func (o *Ops) Registry() *prometheus.Registry { return o.registry }

// Healthz answers 200 while the process serves.
func (o *Ops) Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowRead(w, r) {
			return
		}
		noStore(w.Header())
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// readiness is the /readyz answer.
type readiness struct {
	Ready    bool     `json:"ready"`
	Draining bool     `json:"draining,omitempty"`
	NotReady []string `json:"notReady,omitempty"`
}

// notReadyDraining is the /readyz line of a draining replica.
const notReadyDraining = "draining: this replica takes no new sessions; it serves its open ones while their calls run, then exits"

// Readyz answers 200 once the first load is done and every required
// server is up, else 503 with what is not ready. While the replica drains
// and is otherwise ready, ?draining=404 makes the answer 404 instead: the
// status with which HAProxy's `http-check disable-on-404` stops sending
// new sessions to a server while its sticky ones still reach it.
func (o *Ops) Readyz() http.Handler { return o.readyz(true) }

// ReadyzBrief is Readyz without the reasons: the status and the ready
// flag, for callers that have not authenticated, to whom the servers and
// their errors are none of their business.
func (o *Ops) ReadyzBrief() http.Handler { return o.readyz(false) }

func (o *Ops) readyz(reasons bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowRead(w, r) {
			return
		}
		ready, notReady := o.readiness()
		code := http.StatusOK
		if !ready {
			code = http.StatusServiceUnavailable
			if len(notReady) == 1 && notReady[0] == notReadyDraining && r.URL.Query().Get("draining") == "404" {
				code = http.StatusNotFound
			}
		}
		if !reasons {
			notReady = nil
		}
		writeJSON(w, code, readiness{Ready: ready, Draining: o.draining(), NotReady: o.scrubAll(notReady)})
	})
}

// readiness is the proxy's, and not ready while draining.
func (o *Ops) readiness() (bool, []string) {
	ready, notReady := o.proxy.Readiness()
	if o.draining() {
		return false, append([]string{notReadyDraining}, notReady...)
	}
	return ready, notReady
}

func (o *Ops) draining() bool { return o.opts.Draining != nil && o.opts.Draining() }

// Metrics answers in the Prometheus exposition formats.
func (o *Ops) Metrics() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowRead(w, r) {
			return
		}
		// Before the gathering starts: collectors run concurrently.
		o.rec.sync(o.proxy.Catalog(), o.proxy.Servers())
		o.metrics.ServeHTTP(w, r)
	})
}

// StatusJSON answers the status as JSON.
func (o *Ops) StatusJSON() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowRead(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, o.snapshot())
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "cannot render the status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	noStore(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// allowRead lets GET and HEAD through and answers anything else with 405.
func allowRead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "use GET", http.StatusMethodNotAllowed)
	return false
}

func noStore(h http.Header) { h.Set("Cache-Control", "no-store") }

// errorLog hands promhttp's errors to slog.
type errorLog struct{ log *slog.Logger }

func (l errorLog) Println(v ...any) { l.log.Warn("metrics: " + fmtArgs(v)) }
