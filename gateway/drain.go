package gateway

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// drainPoll is how often a draining replica looks whether its sessions
// and calls are done (downstream.HTTP.Quiet says since when they are).
const drainPoll = 50 * time.Millisecond

// drainQuiet is how long a draining replica with open sessions waits with
// no call in flight before it stops: a session's next call, sent right
// after the last one ended, is still served here.
const drainQuiet = time.Second

// Drainer takes a replica out of a load balancer's rotation without
// failing what runs on it. Once asked (SIGTERM, SIGINT or POST /drain),
// the transport refuses new sessions with 503 and Retry-After and /readyz
// fails, while open sessions keep being served, since their leases live
// here. The replica stops once its calls are done: at once when no
// session is open, else after drainQuiet with no call in flight; at the
// latest when the grace is over. Waiting longer for idle sessions would
// only delay their end: their leases end with the process either way. A
// second signal stops it at once.
type Drainer struct {
	edge  *downstream.HTTP
	grace time.Duration
	log   *slog.Logger

	once      sync.Once
	requested chan struct{} // closed when draining begins
	operators atomic.Pointer[[]string]
}

// NewDrainer drains edge, letting its calls in flight run for grace at most.
func NewDrainer(edge *downstream.HTTP, grace time.Duration, log *slog.Logger) *Drainer {
	return &Drainer{edge: edge, grace: grace, log: log, requested: make(chan struct{})}
}

// Begin starts draining, giving why in the log; later calls do nothing.
func (d *Drainer) Begin(why string) {
	d.once.Do(func() {
		d.edge.Drain()
		d.log.Info("draining", "why", why, "grace", d.grace.String(),
			"sessions", d.edge.Sessions(), "inFlight", d.edge.InFlight())
		close(d.requested)
	})
}

// Draining reports whether Begin was called (ops.Options.Draining).
func (d *Drainer) Draining() bool { return d.edge.Draining() }

// SetOperators follows http.auth.operators: the clients that may POST /drain.
func (d *Drainer) SetOperators(names []string) {
	list := slices.Clone(names)
	d.operators.Store(&list)
}

// Requested is closed when draining begins: by Begin, or by an operator's
// POST /drain.
func (d *Drainer) Requested() <-chan struct{} { return d.requested }

// Wait returns once the drain is done: nothing in flight (for drainQuiet
// while sessions are open), the grace over, or a second stop signal (the first, when a
// signal began the drain; otherwise the second after POST /drain, as an
// orchestrator signals after its pre-stop hook drained).
func (d *Drainer) Wait(bySignal bool) {
	signals := 0
	if bySignal {
		signals = 1
	}
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	deadline := time.NewTimer(d.grace)
	defer deadline.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		// Quiet counts from the end of the last call, whenever it ended: a
		// look every drainPoll alone would miss the short calls that begin
		// and end between two looks, and take a busy replica for an idle one.
		switch sessions, quiet := d.edge.Sessions(), d.edge.Quiet(); {
		case quiet == 0:
		case sessions == 0:
			d.log.Info("drained: no session open, no call in flight")
			return
		case quiet >= drainQuiet:
			d.log.Info("drained: no call in flight; the open sessions end with the process", "sessions", sessions)
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			d.log.Warn("the drain grace is over; ending the calls still running",
				"sessions", d.edge.Sessions(), "inFlight", d.edge.InFlight(), "fix", "raise --drain-grace if calls need longer")
			return
		case s := <-again:
			if signals++; signals < 2 {
				continue
			}
			d.log.Warn("a second stop signal: stopping without waiting for the drain", "signal", s.String())
			return
		}
	}
}

// endpoint serves POST /drain. An operator is a client named in
// http.auth.operators; without http.auth, a request from loopback that
// no proxy forwarded (no Forwarded or X-Forwarded-For header), since a
// load balancer on the same host would otherwise let anyone drain.
func (d *Drainer) endpoint(a *Access) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST to drain this replica", http.StatusMethodNotAllowed)
			return
		}
		if msg, ok := d.operator(a, r); !ok {
			d.log.Info("refused POST /drain", "remote", r.RemoteAddr, "reason", msg)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		d.Begin("POST /drain from " + r.RemoteAddr)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(struct {
			Draining bool   `json:"draining"`
			Grace    string `json:"grace"`
			Sessions int    `json:"sessions"`
			InFlight int    `json:"inFlight"`
		}{true, d.grace.String(), d.edge.Sessions(), d.edge.InFlight()})
	})
	return a.protect(inner)
}

// operator says whether r comes from an operator, and if not, why.
func (d *Drainer) operator(a *Access, r *http.Request) (string, bool) {
	if a != nil && a.guard.Load() != nil {
		client := identity.CallerOf(r.Context()).Client // protect authenticated it
		ops := d.operators.Load()
		if ops != nil && slices.Contains(*ops, client) {
			return "", true
		}
		return "client " + client + " is not an operator: list it in http.auth.operators to let it drain this replica", false
	}
	if r.Header.Get("Forwarded") != "" || r.Header.Get("X-Forwarded-For") != "" {
		return "without http.auth, POST /drain is served only to a local caller, not through a proxy: send it to the replica's own address, or set http.auth with operators", false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return "without http.auth, POST /drain is served only from loopback: run it on the replica's host, or set http.auth with operators", false
	}
	return "", true
}
