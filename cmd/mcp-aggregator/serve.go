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
	"github.com/mcp-aggregator/mcp-aggregator/reload"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
	"github.com/mcp-aggregator/mcp-aggregator/tlsreload"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstreamauth"
)

// shutdownGrace bounds how long in-flight calls may run after a stop signal.
const shutdownGrace = gateway.ShutdownGrace

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
	settle := fs.Duration("reload-settle", reload.DefaultSettle, "reload a config file written in place once it has stayed unchanged this long (one replaced by rename reloads at once)")
	cgroups := fs.String("cgroups", "auto", "`auto`: on Linux, run each stdio upstream in a cgroup v2 of its own where one can be created; off: process groups and the subreaper only")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if *settle <= 0 || *settle > reload.MaxSettle {
		fmt.Fprintf(stderr, "serve: --reload-settle %s: use a duration above 0 and at most %s, such as 300ms\n", *settle, reload.MaxSettle)
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
	keys, err := reload.SessionKeys(keysCtx, *keyFile, *settle, log)
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
	// The client ID metadata documents of the config, which the HTTP
	// gateway serves; kept up to date on stdio too, where none is served.
	clientDocs := &oauth.ClientDocuments{}
	// The first load's outcome: an exit code, which a required server that
	// fails sends as soon as it fails (a second send fits too).
	loaded := make(chan int, 2)
	firstLoad := reload.NewRequired(log, loaded)
	// A shared login is offered only where the aggregator serves one
	// person: the login's browser comes back to this machine's loopback,
	// and every client shares the tokens it gets. A per-user login comes
	// back to the gateway's own callback, and is the caller's alone.
	upAuth := upstreamauth.New(ctx, upstreamauth.Options{Secrets: &c.secrets, Logger: log,
		SharedOffers: *httpAddr == "" || gateway.LoopbackBind(*httpAddr)})
	offerLogin := proxy.LoginOffer(upAuth.OfferLogin)
	p := proxy.New(proxy.Options{Logger: log, Version: buildVersion(), Observer: recorder, Tracer: tracer,
		MaxTasksPerClient: *maxTasks, MaxLeasesPerClient: *maxLeases, MaxCallsPerClient: *maxCalls,
		Upstream:     upstream.Options{Supervisor: supervisor, Authorize: upAuth.Authorize, Secrets: &c.secrets},
		AuthProblems: upAuth.Problems, OfferLogin: offerLogin,
		// A server that fails at once is told at once, not when the
		// slowest of the others is done.
		OnStartFailed: func(pr config.Problem) {
			reload.LogProblems(log, []config.Problem{pr}, nil)
			firstLoad.StartFailed(pr.Server)
		},
		OnWorkspace: func(ws *config.Workspace) {
			upAuth.OnWorkspace(ctx, ws)
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
	upAuth.AuditTo(p.Audit) // token exchanges and per-user logins get their audit lines
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
		var paths []string
		if !src.demo {
			paths = src.paths
		}
		loop := &reload.Loop{Proxy: p, Load: src.loadLive, Paths: paths, Settle: *settle, Logins: upAuth.Changed(), Signals: hup, Logger: log}
		loop.Run(loadCtx, func() (*config.Workspace, bool) {
			code, ws := loop.FirstLoad(loadCtx, firstLoad)
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
	gw := &gateway.Gateway{Edge: edge, Proxy: p, Access: gwAuth, Drain: drain, LoginCallback: upAuth.Callback(), Logout: upAuth.Logout(), ClientMetadata: clientDocs,
		Ops: ops.New(p, recorder, ops.Options{Logger: log, Version: buildVersion(), Secrets: &c.secrets, Draining: drain.Draining})}
	// Drained, then the listen streams ended, the server shut down and the
	// proxy closed, in that order; the deferred closes above then find
	// nothing left to do but the supervisor's and the tracer's.
	return gw.Serve(ctx, ln, tlsConfig != nil, loaded, log)
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

// replicaLabel names this replica in the sealed ids it issues: its
// --session-id-prefix without the separator it ends with, else the host
// name.
func replicaLabel(prefix string) string {
	if l := strings.TrimRight(prefix, "-._"); l != "" {
		return l
	}
	host, _ := os.Hostname()
	return host
}
