package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/configsource"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/gateway"
	"github.com/mcp-aggregator/mcp-aggregator/internal/memtrim"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sealed"
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

// server is what serve builds. What only the HTTP front needs (the
// certificate, the keys, the listener, the guard, the endpoint and the
// drain) is nil on stdio.
type server struct {
	flags *serveFlags
	log   *slog.Logger
	hup   chan os.Signal // SIGHUP: reload
	src   configsource.Source

	tls  *tls.Config  // --tls-cert; nil: plain HTTP
	keys *sealed.Keys // --session-key-file; nil: none
	ln   net.Listener // --http

	recorder   *ops.Recorder
	tracer     *telemetry.Tracer
	supervisor *supervise.Supervisor
	upAuth     *upstreamauth.Auth
	proxy      *proxy.Proxy
	// clientDocs are the client ID metadata documents of the config, which
	// the HTTP gateway serves; kept up to date on stdio too, where none is
	// served.
	clientDocs *oauth.ClientDocuments
	// loaded takes the first load's outcome: an exit code, which a required
	// server that fails sends as soon as it fails (a second send fits too).
	loaded    chan int
	firstLoad *reload.Required

	access *gateway.Access  // set before the first load, which calls onWorkspace
	edge   *downstream.HTTP // likewise
	drain  *gateway.Drainer // likewise
}

// serve runs the aggregator until the client goes away, a stop signal, a
// drain, or a first load that fails. Each step below builds one part; the
// defers undo them in the reverse order, the proxy (and with it every
// upstream) before the supervisor, the tracer flushed after both.
func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, code := parseServe(args, stderr)
	if f == nil {
		return code
	}
	log, err := f.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	s := &server{flags: f, log: log}
	// SIGHUP means "reload" from the first moment on: one that arrives while
	// the upstreams start is answered with a reload once they have, never by
	// the default action of ending the process.
	s.hup = make(chan os.Signal, 1)
	signal.Notify(s.hup, syscall.SIGHUP)
	defer signal.Stop(s.hup)
	s.src = f.source()
	s.src.Log(log)

	keysCtx, stopKeys := context.WithCancel(context.Background())
	defer stopKeys()
	if code := s.openFront(keysCtx); code != 0 {
		return code
	}
	if s.ln != nil {
		defer s.ln.Close() // a no-op once the server has taken it
	}
	s.recorder = ops.NewRecorder(recentReloads)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s.startTracer()
	defer s.flushTraces() // last: the spans of the last requests go out too
	s.supervisor = startSupervisor(log, f.cgroups == "off")
	defer s.supervisor.Close() // after the proxy's Close below: every upstream is gone by then
	s.buildProxy(ctx)
	if f.httpAddr != "" {
		if code := s.buildHTTP(); code != 0 {
			return code
		}
	}
	defer s.closeProxy()

	// Upstreams start while the downstream is already served: a slow or
	// broken server never delays the client's initialize.
	// The load stops early if the downstream goes away while upstreams start.
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	go s.load(loadCtx)

	if f.httpAddr == "" {
		return s.serveStdio(ctx, stdin, stdout, cancelLoad)
	}
	return s.serveHTTP(ctx)
}

// openFront reads what the HTTP front needs before anything starts: the
// TLS certificate, the session keys (watched until keysCtx ends), and the
// address, taken now so that one in use stops the start at once, with
// nothing to close. Connections wait in the backlog until the gateway
// serves them. It returns an exit code, 0 when serve goes on.
func (s *server) openFront(keysCtx context.Context) int {
	f := s.flags
	if f.tlsCert != "" {
		certs, err := tlsreload.New(f.tlsCert, f.tlsKey, s.log)
		if err != nil {
			s.log.Error("cannot serve HTTPS", "err", err)
			return 2
		}
		s.tls = certs.Config()
	}
	keys, err := reload.SessionKeys(keysCtx, f.keyFile, f.settle, s.log)
	if err != nil {
		s.log.Error("cannot serve", "err", err)
		return 2
	}
	s.keys = keys
	if f.httpAddr != "" {
		s.ln, err = net.Listen("tcp", gateway.ListenAddr(f.httpAddr))
		if err != nil {
			s.log.Error("cannot listen", "addr", f.httpAddr, "err", err)
			return 1
		}
	}
	return 0
}

// startTracer starts the export of traces: off unless an OTLP endpoint is
// set.
func (s *server) startTracer() {
	s.flags.secrets.Add(telemetry.Secrets(os.Getenv)...) // a collector's refusal may quote them
	s.tracer = telemetry.FromEnv(context.Background(), s.log, buildVersion())
}

// flushTraces exports the spans still buffered, for traceFlushGrace at most.
func (s *server) flushTraces() {
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushGrace)
	defer cancel()
	if err := s.tracer.Shutdown(ctx); err != nil {
		s.log.Warn("not every span could be exported before exit", "err", err)
	}
}

// buildProxy builds the proxy, with the upstreams' authorization, and what
// watches its first load.
func (s *server) buildProxy(ctx context.Context) {
	f := s.flags
	s.clientDocs = &oauth.ClientDocuments{}
	s.loaded = make(chan int, 2)
	s.firstLoad = reload.NewRequired(s.log, s.loaded)
	// A shared login is offered only where the aggregator serves one
	// person: the login's browser comes back to this machine's loopback,
	// and every client shares the tokens it gets. A per-user login comes
	// back to the gateway's own callback, and is the caller's alone.
	s.upAuth = upstreamauth.New(ctx, upstreamauth.Options{Secrets: &f.secrets, Logger: s.log,
		SharedOffers: f.httpAddr == "" || gateway.LoopbackBind(f.httpAddr)})
	s.proxy = proxy.New(proxy.Options{Logger: s.log, Version: buildVersion(), Observer: s.recorder, Tracer: s.tracer,
		MaxTasksPerClient: f.maxTasks, MaxLeasesPerClient: f.maxLeases, MaxCallsPerClient: f.maxCalls,
		Upstream:     upstream.Options{Supervisor: s.supervisor, Authorize: s.upAuth.Authorize, Secrets: &f.secrets},
		AuthProblems: s.upAuth.Problems, OfferLogin: proxy.LoginOffer(s.upAuth.OfferLogin),
		// A server that fails at once is told at once, not when the
		// slowest of the others is done.
		OnStartFailed: func(pr config.Problem) {
			reload.LogProblems(s.log, []config.Problem{pr}, nil)
			s.firstLoad.StartFailed(pr.Server)
		},
		OnWorkspace: func(ws *config.Workspace) { s.onWorkspace(ctx, ws) },
	})
	s.upAuth.AuditTo(s.proxy.Audit) // token exchanges and per-user logins get their audit lines
}

// onWorkspace hands each config the proxy takes to the parts that read it
// beside the proxy: the upstreams' authorization, the client ID metadata
// documents, and the HTTP front's guard, drain and limits.
func (s *server) onWorkspace(ctx context.Context, ws *config.Workspace) {
	s.upAuth.OnWorkspace(ctx, ws)
	if docs := ws.ClientIDURLs(); s.clientDocs.Set(docs) && s.flags.httpAddr != "" {
		urls := make([]string, 0, len(docs))
		for u := range docs {
			urls = append(urls, u)
		}
		sort.Strings(urls)
		s.log.Info("serving the client ID metadata documents of upstream logins at their paths", "urls", urls)
	}
	if s.access != nil {
		s.access.Apply(ws)
	}
	if s.drain != nil {
		s.drain.SetOperators(ws.HTTP.Auth.Operators)
	}
	if s.edge != nil {
		s.edge.SetAllowedOrigins(ws.HTTP.AllowedOrigins)
		s.edge.SetMaxBodyBytes(ws.HTTP.MaxBodyBytes)
		s.edge.SetMaxBatchBytes(ws.HTTP.MaxBatchBytes)
	}
}

// buildHTTP builds the HTTP front: the guard, the MCP endpoint and the
// drain. Authentication is in force before the first byte is served: the
// config is read once now for http.auth, before the listener opens. It
// returns an exit code, 0 when serve goes on.
func (s *server) buildHTTP() int {
	f := s.flags
	s.access = gateway.NewAccess(s.log, f.httpAddr, f.allowUnauth)
	if err := s.access.Start(s.src.LoadLive()); err != nil {
		s.log.Error("cannot serve", "err", err)
		return 1
	}
	host, _ := os.Hostname()
	s.edge = downstream.NewHTTP(s.proxy, downstream.HTTPOptions{Logger: s.log, SessionIdleTTL: f.sessionTTL, TLS: s.tls,
		SessionIDPrefix: f.idPrefix, MaxSessions: f.maxSessions, MaxSessionsPerClient: f.maxPerClient,
		MaxConnsPerClient: f.maxConns, ClientsByAddress: !gateway.LoopbackBind(f.httpAddr),
		ProbePaths: gateway.ProbePaths(), LeaseHere: s.proxy.HoldsLease, RateWait: s.proxy.RateWait,
		SessionKeys: s.keys, SessionMaxAge: f.maxAge, Replica: gateway.ReplicaLabel(f.idPrefix, host)})
	s.drain = gateway.NewDrainer(s.edge, f.drainGrace, s.log)
	return 0
}

// closeProxy closes the proxy, and with it every upstream, letting the
// calls in flight end for shutdownGrace at most; then the refreshes of
// upstream logins.
func (s *server) closeProxy() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	s.proxy.Close(ctx)
	s.log.Info("stopped; every upstream is closed")
	closeLogins(s.upAuth)
}

// closeLogins ends the refreshes of upstream logins: one the authorization
// server may already have answered, rotating the refresh token, has what
// it got saved before the process exits, for oauth.RefreshTimeout at most.
func closeLogins(a *upstreamauth.Auth) {
	ctx, cancel := context.WithTimeout(context.Background(), oauth.RefreshTimeout)
	defer cancel()
	_ = a.Close(ctx) // a refresh that outlasts it is logged
}

// load runs the first load, then keeps the proxy on the config files as
// they change, until ctx ends.
func (s *server) load(ctx context.Context) {
	loop := &reload.Loop{Proxy: s.proxy, Load: s.src.LoadLive, Paths: s.src.Watched(), Settle: s.flags.settle,
		Logins: s.upAuth.Changed(), Signals: s.hup, Logger: s.log}
	loop.Run(ctx, func() (*config.Workspace, bool) {
		code, ws := loop.FirstLoad(ctx, s.firstLoad)
		// What starting took and no longer needs: the heap the
		// initialisation and the first load left free, and the pages of
		// the binary they touched; and again whenever traffic stops.
		memtrim.Trim()
		go memtrim.WhenIdle(ctx)
		s.loaded <- code
		return ws, code == 0
	})
}

// serveStdio serves the one client on stdin and stdout until it goes away,
// a stop signal, or a first load that fails, and returns the exit code.
// cancelLoad stops a load still under way once the client is gone.
func (s *server) serveStdio(ctx context.Context, stdin io.Reader, stdout io.Writer, cancelLoad func()) int {
	errc := make(chan error, 1)
	in, out, polled, restore := pipeio.PollStdio(stdin, stdout)
	defer restore()
	if polled {
		pipeio.OneProcessor(s.log)
	}
	go func() { errc <- s.proxy.ServeStdio(ctx, in, out) }()
	select {
	case code := <-s.loaded:
		if code != 0 {
			return code
		}
	case err := <-errc:
		cancelLoad()
		return stdioDone(ctx, err, s.log)
	}
	err := <-errc
	cancelLoad()
	return stdioDone(ctx, err, s.log)
}

// serveHTTP serves the gateway on the listener until a stop signal, a
// drain, a first load that fails, or a failure of the server.
func (s *server) serveHTTP(ctx context.Context) int {
	gw := &gateway.Gateway{Edge: s.edge, Proxy: s.proxy, Access: s.access, Drain: s.drain,
		LoginCallback: s.upAuth.Callback(), Logout: s.upAuth.Logout(), ClientMetadata: s.clientDocs,
		Ops: ops.New(s.proxy, s.recorder, ops.Options{Logger: s.log, Version: buildVersion(), Secrets: &s.flags.secrets, Draining: s.drain.Draining})}
	// Drained, then the listen streams ended, the server shut down and the
	// proxy closed, in that order; the deferred closes of serve then find
	// nothing left to do but the supervisor's and the tracer's.
	return gw.Serve(ctx, s.ln, s.tls != nil, s.loaded, s.log)
}

// startSupervisor sets up process supervision (see supervise.Supervisor),
// with this binary run as the reaper process (supervise.ReaperCommand, which
// the supervise package serves as it initialises) that
// kills what is left if this process dies without closing its upstreams.
func startSupervisor(log *slog.Logger, noCgroups bool) *supervise.Supervisor {
	opts := supervise.Options{Logger: log, NoCgroups: noCgroups}
	if exe, err := os.Executable(); err == nil {
		opts.Reaper = []string{exe, supervise.ReaperCommand}
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
