package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/gateway"
	"github.com/mcp-aggregator/mcp-aggregator/internal/memtrim"
	"github.com/mcp-aggregator/mcp-aggregator/internal/telemetry"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
	"github.com/mcp-aggregator/mcp-aggregator/ops"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
	"github.com/mcp-aggregator/mcp-aggregator/tlsreload"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// shutdownGrace bounds how long in-flight calls may run after a stop signal.
const shutdownGrace = 10 * time.Second

// recentReloads is how many reloads the status page lists.
const recentReloads = 20

// traceFlushGrace bounds the export of the spans still buffered at exit.
const traceFlushGrace = 5 * time.Second

func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c common
	c.register(fs)
	httpAddr := fs.String("http", "", "serve streamable HTTP at http://`ADDR`/mcp instead of stdio (loopback unless a host is given)")
	sessionTTL := fs.Duration("session-idle-ttl", 30*time.Minute, "with --http: end HTTP sessions idle this long (their leases end too)")
	maxSessions := fs.Int("max-sessions", downstream.DefaultMaxSessions, "with --http: refuse a new session (503) while this many are open")
	maxPerClient := fs.Int("max-sessions-per-client", downstream.DefaultMaxSessionsPerClient, "with --http: refuse a new session (429) of a client (its http.auth name, else its address off loopback) while it holds this many; 0: no cap beyond --max-sessions")
	maxTasks := fs.Int("max-tasks-per-client", proxy.DefaultMaxTasksPerClient, "with --http: refuse a task-augmented call of a client (its http.auth name, else its address off loopback) while its sessions hold this many tasks; 0: no cap beyond the aggregator's 10000")
	maxLeases := fs.Int("max-leases-per-client", proxy.DefaultMaxLeasesPerClient, "with --http: refuse a client (its http.auth name, else its address off loopback) a new lease of a server while it holds this many of that server's instances; -1: half of the server's lease.max_instances; 0: no cap beyond lease.max_instances")
	maxCalls := fs.Int("max-calls-per-client", proxy.DefaultMaxCallsPerClient, "with --http: a client (its http.auth name, else its address off loopback) holding this many calls in flight waits for one of them to end before its next starts, so that limits.max_concurrent always leaves room for the others; -1: half of limits.max_concurrent; 0: no share of its own")
	maxConns := fs.Int("max-conns-per-address", downstream.DefaultMaxConnsPerClient, "with --http: answer 429 to a connection from an address that holds this many open; 0: no cap (behind a load balancer, every client shares its address)")
	allowUnauth := fs.Bool("allow-unauthenticated", false, "with --http on a non-loopback address: serve even though the config sets no http.auth (only behind something that authenticates)")
	tlsCert := fs.String("tls-cert", "", "with --http: serve HTTPS with the PEM certificate chain in `FILE` (reloaded when it changes; needs --tls-key)")
	tlsKey := fs.String("tls-key", "", "with --http: the PEM private key of --tls-cert, in `FILE`")
	drainGrace := fs.Duration("drain-grace", shutdownGrace, "with --http: after SIGTERM or POST /drain, let the calls in flight run this long at most while refusing new sessions, then exit")
	idPrefix := fs.String("session-id-prefix", "", "with --http: start every session id with `LABEL` (letters, digits, '.', '_', '-'; at most 32), so that a load balancer can route sessions by it")
	keyFile := fs.String("session-key-file", "", "with --http: seal each session's portable state into its id with the first key of `FILE` (one key a line: 32 random bytes, base64 or hex; every key opens; reloaded when it changes), so that every replica holding the file can serve the session")
	maxAge := fs.Duration("session-max-age", downstream.DefaultSessionMaxAge, "with --session-key-file: a sealed session id opens for this long after its initialize; then the client initializes again")
	settle := fs.Duration("reload-settle", reloadSettle, "reload a config file written in place once it has stayed unchanged this long (one replaced by rename reloads at once)")
	cgroups := fs.String("cgroups", "auto", "`auto`: on Linux, run each stdio upstream in a cgroup v2 of its own where one can be created; off: process groups and the subreaper only")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if *settle <= 0 || *settle > maxReloadSettle {
		fmt.Fprintf(stderr, "serve: --reload-settle %s: use a duration above 0 and at most %s, such as 300ms\n", *settle, maxReloadSettle)
		return 2
	}
	if *cgroups != "auto" && *cgroups != "off" {
		fmt.Fprintf(stderr, "serve: --cgroups %q: use auto or off\n", *cgroups)
		return 2
	}
	if !downstream.ValidSessionIDPrefix(*idPrefix) {
		fmt.Fprintf(stderr, "serve: --session-id-prefix %q: use 1 to 32 letters, digits, '.', '_' or '-', such as r1-\n", *idPrefix)
		return 2
	}
	if *maxPerClient < 0 {
		fmt.Fprintf(stderr, "serve: --max-sessions-per-client %d: use a count of sessions, or 0 for no cap beyond --max-sessions\n", *maxPerClient)
		return 2
	}
	for _, f := range []struct {
		name  string
		n     int
		min   int
		extra string // what -1 means
	}{
		{"max-tasks-per-client", *maxTasks, 0, ""},
		{"max-leases-per-client", *maxLeases, -1, ", or -1 for half of each server's lease.max_instances"},
		{"max-calls-per-client", *maxCalls, -1, ", or -1 for half of limits.max_concurrent"},
	} {
		if f.n < f.min {
			fmt.Fprintf(stderr, "serve: --%s %d: use a count, or 0 for no cap of the client's own%s\n", f.name, f.n, f.extra)
			return 2
		}
	}
	if *httpAddr == "" {
		*maxTasks, *maxLeases, *maxCalls = 0, 0, 0 // stdio has one client: no share to keep
	}
	if *maxConns < 0 {
		fmt.Fprintf(stderr, "serve: --max-conns-per-address %d: use a count of connections, or 0 for no cap\n", *maxConns)
		return 2
	}
	if *maxConns == 0 {
		*maxConns = -1 // the transport's "no cap"
	}
	if *maxPerClient == 0 {
		*maxPerClient = -1 // the transport's "no cap of its own"
	}
	if *maxAge <= 0 {
		fmt.Fprintf(stderr, "serve: --session-max-age %s: use a positive duration such as 24h\n", *maxAge)
		return 2
	}
	if *keyFile != "" && *httpAddr == "" {
		fmt.Fprintf(stderr, "serve: --session-key-file needs --http: stdio sessions have no id to seal\n")
		return 2
	}
	if *drainGrace <= 0 {
		fmt.Fprintf(stderr, "serve: --drain-grace %s: use a positive duration such as 30s\n", *drainGrace)
		return 2
	}
	if err := checkHTTPAddr(*httpAddr); err != nil {
		fmt.Fprintln(stderr, "serve:", err)
		return 2
	}
	if err := tlsFlags(*tlsCert, *tlsKey, *httpAddr); err != nil {
		fmt.Fprintln(stderr, "serve:", err)
		return 2
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	// SIGHUP means "reload" from the first moment on: one that arrives while
	// the upstreams start is answered with a reload once they have, never by
	// the default action of ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	src := c.discover(log)
	var tlsConfig *tls.Config
	if *tlsCert != "" {
		certs, err := tlsreload.New(*tlsCert, *tlsKey, log)
		if err != nil {
			log.Error("cannot serve HTTPS", "err", err)
			return 2
		}
		tlsConfig = certs.Config()
	}
	keysCtx, stopKeys := context.WithCancel(context.Background())
	defer stopKeys()
	keys, err := sessionKeys(keysCtx, *keyFile, *settle, log)
	if err != nil {
		log.Error("cannot serve", "err", err)
		return 2
	}
	// The address is taken before anything starts: one that is in use stops
	// the start at once, with nothing to close. Connections wait in the
	// backlog until the gateway serves them.
	var ln net.Listener
	if *httpAddr != "" {
		ln, err = net.Listen("tcp", gateway.ListenAddr(*httpAddr))
		if err != nil {
			log.Error("cannot listen", "addr", *httpAddr, "err", err)
			return 1
		}
		defer ln.Close() // a no-op once the server has taken it
	}
	recorder := ops.NewRecorder(recentReloads)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c.secrets.Add(telemetry.Secrets(os.Getenv)...) // a collector's refusal may quote them
	// Off unless an OTLP endpoint is set. Flushed last, after the proxy's
	// Close below, so that the spans of the last requests go out too.
	tracer := telemetry.FromEnv(context.Background(), log, buildVersion())
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), traceFlushGrace)
		defer cancel()
		if err := tracer.Shutdown(fctx); err != nil {
			log.Warn("not every span could be exported before exit", "err", err)
		}
	}()

	supervisor := startSupervisor(log, *cgroups == "off")
	defer supervisor.Close()   // after the proxy's Close below: every upstream is gone by then
	var edge *downstream.HTTP  // set before the first load, which calls OnWorkspace
	var gwAuth *gateway.Access // likewise; nil on stdio
	var drain *gateway.Drainer // likewise; nil on stdio
	upAuth := newUpstreamAuth(ctx, &c, log)
	// The client ID metadata documents of the config, which the HTTP
	// gateway serves; kept up to date on stdio too, where none is served.
	clientDocs := &oauth.ClientDocuments{}
	// The first load's outcome: an exit code, which a required server that
	// fails sends as soon as it fails (a second send fits too).
	loaded := make(chan int, 2)
	firstLoad := &requiredWatch{log: log, loaded: loaded}
	// A shared login is offered only where the aggregator serves one
	// person: the login's browser comes back to this machine's loopback,
	// and every client shares the tokens it gets. A per-user login comes
	// back to the gateway's own callback, and is the caller's alone.
	upAuth.sharedOffers = *httpAddr == "" || gateway.LoopbackBind(*httpAddr)
	offerLogin := proxy.LoginOffer(upAuth.offerLogin)
	p := proxy.New(proxy.Options{Logger: log, Version: buildVersion(), Observer: recorder, Tracer: tracer,
		MaxTasksPerClient: *maxTasks, MaxLeasesPerClient: *maxLeases, MaxCallsPerClient: *maxCalls,
		Upstream:     upstream.Options{Supervisor: supervisor, Authorize: upAuth.authorize, Secrets: &c.secrets},
		AuthProblems: upAuth.problems, OfferLogin: offerLogin,
		// A server that fails at once is told at once, not when the
		// slowest of the others is done.
		OnStartFailed: func(pr config.Problem) {
			logProblems(log, []config.Problem{pr}, nil)
			firstLoad.startFailed(pr.Server)
		},
		OnWorkspace: func(ws *config.Workspace) {
			upAuth.onWorkspace(ctx, ws)
			if docs := ws.ClientIDURLs(); clientDocs.Set(docs) && *httpAddr != "" {
				urls := make([]string, 0, len(docs))
				for u := range docs {
					urls = append(urls, u)
				}
				sort.Strings(urls)
				log.Info("serving the client ID metadata documents of upstream logins at their paths", "urls", urls)
			}
			if gwAuth != nil {
				gwAuth.Apply(ws)
			}
			if drain != nil {
				drain.SetOperators(ws.HTTP.Auth.Operators)
			}
			if edge != nil {
				edge.SetAllowedOrigins(ws.HTTP.AllowedOrigins)
				edge.SetMaxBodyBytes(ws.HTTP.MaxBodyBytes)
				edge.SetMaxBatchBytes(ws.HTTP.MaxBatchBytes)
			}
		}})
	upAuth.auditTo(p.Audit) // token exchanges and per-user logins get their audit lines
	if *httpAddr != "" {
		// Authentication is in force before the first byte is served: the
		// config is read once now for http.auth, before the listener opens.
		gwAuth = gateway.NewAccess(log, *httpAddr, *allowUnauth)
		if err := gwAuth.Start(src.loadLive()); err != nil {
			log.Error("cannot serve", "err", err)
			return 1
		}
		edge = downstream.NewHTTP(p, downstream.HTTPOptions{Logger: log, SessionIdleTTL: *sessionTTL, TLS: tlsConfig,
			SessionIDPrefix: *idPrefix, MaxSessions: *maxSessions, MaxSessionsPerClient: *maxPerClient,
			MaxConnsPerClient: *maxConns, ClientsByAddress: !gateway.LoopbackBind(*httpAddr),
			ProbePaths: gateway.ProbePaths(), LeaseHere: p.HoldsLease, RateWait: p.RateWait,
			SessionKeys: keys, SessionMaxAge: *maxAge, Replica: replicaLabel(*idPrefix)})
		drain = gateway.NewDrainer(edge, *drainGrace, log)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		p.Close(cctx)
		log.Info("stopped; every upstream is closed")
	}()

	// Upstreams start while the downstream is already served: a slow or
	// broken server never delays the client's initialize.
	// The load stops early if the downstream goes away while upstreams start.
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	go func() {
		watch := startWatch(loadCtx, src, nil, *settle, log) // before the load, so no save after it is missed
		watchAndReload(loadCtx, p, watch, upAuth.changed, hup, log, func() (*config.Workspace, bool) {
			code, ws := initialLoad(loadCtx, p, src, firstLoad, log)
			// What starting took and no longer needs: the heap the
			// initialisation and the first load left free, and the pages of
			// the binary they touched; and again whenever traffic stops.
			memtrim.Trim()
			go memtrim.WhenIdle(loadCtx)
			loaded <- code
			return ws, code == 0
		})
	}()

	if *httpAddr == "" {
		errc := make(chan error, 1)
		in, out, polled, restore := pollableStdio(stdin, stdout)
		defer restore()
		if polled {
			oneProcessor(log)
		}
		go func() { errc <- p.ServeStdio(ctx, in, out) }()
		select {
		case code := <-loaded:
			if code != 0 {
				return code
			}
		case err := <-errc:
			cancelLoad()
			return stdioDone(ctx, err, log)
		}
		err := <-errc
		cancelLoad()
		return stdioDone(ctx, err, log)
	}
	return serveHTTP(ctx, &gateway.Gateway{Edge: edge, Proxy: p, Access: gwAuth, Drain: drain, LoginCallback: upAuth.callback(), Logout: upAuth.logout(), ClientMetadata: clientDocs,
		Ops: ops.New(p, recorder, ops.Options{Logger: log, Version: buildVersion(), Secrets: &c.secrets, Draining: drain.Draining})}, tlsConfig != nil, ln, loaded, log)
}

// startSupervisor sets up process supervision (see supervise.Supervisor),
// with this binary's hidden _reaper subcommand as the reaper process that
// kills what is left if this process dies without closing its upstreams.
func startSupervisor(log *slog.Logger, noCgroups bool) *supervise.Supervisor {
	opts := supervise.Options{Logger: log, NoCgroups: noCgroups}
	if exe, err := os.Executable(); err == nil {
		opts.Reaper = []string{exe, "_reaper"}
	} else {
		log.Warn("no reaper: upstream processes may outlive a killed aggregator", "err", err)
	}
	return supervise.New(opts)
}

// stdioDone logs why the stdio server stopped and returns the exit code: 0
// for the client closing stdin or a stop signal (ctx done), 1 for a failure.
func stdioDone(ctx context.Context, err error, log *slog.Logger) int {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		log.Error("stdio transport failed", "err", err)
		return 1
	}
	if ctx.Err() != nil {
		log.Info("stop signal: shutting down")
		return 0
	}
	log.Info("downstream closed; shutting down")
	return 0
}

// initialLoad loads the config and starts every upstream. It returns a
// non-zero exit code when a required server could not start, and the
// workspace loaded (nil when it was rejected).
func initialLoad(ctx context.Context, p *proxy.Proxy, src source, watch *requiredWatch, log *slog.Logger) (int, *config.Workspace) {
	defer p.MarkLoaded()
	ws, problems := src.loadLive()
	if ws == nil {
		log.Error("config rejected; serving no upstream server until the errors below are fixed (the config is reloaded when it changes, or on SIGHUP)")
	}
	watch.arm(ws)
	report := p.Reconcile(ctx, ws, problems)
	watch.disarm()
	logProblems(log, report.Problems, report.StartFailed)
	logRejected(log, ws, nil)
	// One line, of bounded length however many tools the upstreams export.
	const shown = 100
	entries := p.Catalog().Entries()
	names := make([]string, 0, min(len(entries), shown)+1)
	for _, e := range entries[:min(len(entries), shown)] {
		names = append(names, e.Exported)
	}
	if len(entries) > shown {
		names = append(names, fmt.Sprintf("… (%d more; tools/list or mcp-aggregator tools lists them)", len(entries)-shown))
	}
	log.Info("exporting tools", "count", len(entries), "tools", strings.Join(names, ", "), "version", report.Version)
	if ws != nil {
		for _, s := range ws.Servers {
			if s.Required && contains(report.Failed, s.ID) {
				watch.exit(s.ID) // once: it may have been told as the server failed
				return 1, ws
			}
		}
	}
	return 0, ws
}

// requiredWatch ends serve as soon as a server marked required fails to
// start on the first load, rather than when the slowest other server is
// ready or past its connect_timeout. Reloads are not watched: a required
// server that fails in one keeps its last good state.
type requiredWatch struct {
	log    *slog.Logger
	loaded chan<- int // serve exits with the code sent here

	mu       sync.Mutex
	required map[string]bool // while the first load runs: the required servers
	told     bool            // serve was told to exit
}

// arm watches the required servers of ws (nil: none) until disarm.
func (w *requiredWatch) arm(ws *config.Workspace) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.required = map[string]bool{}
	if ws == nil {
		return
	}
	for _, s := range ws.Servers {
		if s.Required {
			w.required[s.ID] = true
		}
	}
}

// disarm ends the watch: the first load is over.
func (w *requiredWatch) disarm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.required = nil
}

// startFailed is told of each server whose start failed, every attempt
// spent (proxy.Options.OnStartFailed).
func (w *requiredWatch) startFailed(id string) {
	w.mu.Lock()
	watched := w.required[id]
	w.mu.Unlock()
	if watched && w.exit(id) {
		w.loaded <- 1
	}
}

// exit logs why serve exits, the first time only, and reports whether this
// was the first.
func (w *requiredWatch) exit(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told {
		return false
	}
	w.told = true
	w.log.Error("a required server could not start; exiting", "server", id,
		"fix", "repair the server or set required: false to serve without it")
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checkHTTPAddr rejects a --http value that names no address to listen on.
func checkHTTPAddr(addr string) error {
	if addr == "" {
		return nil
	}
	const want = "use HOST:PORT, :PORT or PORT, such as 127.0.0.1:8080"
	_, port, err := net.SplitHostPort(gateway.ListenAddr(addr))
	if err != nil {
		return fmt.Errorf("--http %q is not an address to listen on; %s", addr, want)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("--http %q: %q is not a port; %s", addr, port, want)
	}
	return nil
}

// tlsFlags checks that --tls-cert and --tls-key come together and only
// with --http.
func tlsFlags(certFile, keyFile, httpAddr string) error {
	switch {
	case certFile == "" && keyFile == "":
		return nil
	case certFile == "" || keyFile == "":
		return errors.New("--tls-cert and --tls-key go together: give both files (the PEM certificate chain and its private key) or neither")
	case httpAddr == "":
		return errors.New("--tls-cert and --tls-key serve HTTPS and need --http ADDR")
	}
	return nil
}

// serveHTTP serves gw on ln (over HTTPS when https) until the first load
// fails, a stop signal or POST /drain, or the server fails, then drains and
// shuts down. It returns the exit code.
func serveHTTP(ctx context.Context, gw *gateway.Gateway, https bool, ln net.Listener, loaded <-chan int, log *slog.Logger) int {
	edge := gw.Edge
	errc := make(chan error, 1)
	go func() { errc <- edge.Serve(ln, gw.Handler()) }()
	// Tests and scripts read this line to learn the port.
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	log.Info("listening", "url", scheme+ln.Addr().String()+"/mcp")

	code := 0
	signalled := false
	select {
	case code = <-loaded:
		if code == 0 {
			select {
			case <-ctx.Done():
				signalled = true
			case <-gw.Drain.Requested():
			case err := <-errc:
				log.Error("http server failed", "err", err)
				code = 1
			}
		}
	case <-ctx.Done():
		signalled = true
	case <-gw.Drain.Requested():
	case err := <-errc:
		log.Error("http server failed", "err", err)
		code = 1
	}
	if code == 0 {
		// A stop signal or POST /drain: out of the balancer's rotation
		// first, then stop once the open sessions are done.
		why := "POST /drain"
		if signalled {
			why = "stop signal"
		}
		gw.Drain.Begin(why)
		gw.Drain.Wait(signalled)
	}
	log.Info("shutting down")
	// Listen streams get their final result while the server still writes
	// to them; its shutdown then finds them done rather than cut.
	gw.Proxy.EndListeners()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = edge.Shutdown(sctx)
	return code
}

// oneProcessor runs the stdio server's Go code on one processor at a time,
// unless GOMAXPROCS is set. A stdio server has one client and spends its time
// passing messages between pipes the poller watches: with a second processor
// idle, every hand-off from one goroutine to another (the reader's to a
// worker, an upstream's answer to its caller, a response to the writer) wakes
// a second thread, which on a small machine preempts the work it was woken
// for. On one processor those hand-offs are plain goroutine switches. The
// HTTP server, which has many clients, keeps every processor.
func oneProcessor(log *slog.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	log.Debug("serving stdio on one processor", "was", runtime.GOMAXPROCS(1), "override", "set GOMAXPROCS")
}
