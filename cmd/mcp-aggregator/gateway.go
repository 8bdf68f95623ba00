package main

import (
	"log/slog"
	"net/http"

	"github.com/mcp-aggregator/mcp-aggregator/auth"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/ops"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// gateway assembles what `serve --http` answers: the MCP endpoint and the
// operations endpoints beside it.
type gateway struct {
	edge  *downstream.HTTP
	proxy *proxy.Proxy
	log   *slog.Logger
	ops   *ops.Ops // probes, metrics and the status page
	tls   bool     // served over HTTPS
	auth  *access  // http.auth (gateway_auth.go); nil: nothing to check
	drain *drainer // SIGTERM and POST /drain (drain.go)
}

// handler routes every path the gateway serves.
func (g *gateway) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.protect(g.edge))
	if g.drain != nil {
		// Operators only: see drainer.endpoint.
		mux.Handle("/drain", g.drain.endpoint(g.auth))
	}
	// How an OAuth client learns where to get a token: open by nature.
	mux.Handle(auth.WellKnownPath, g.auth.metadata())
	mux.Handle(auth.WellKnownPath+"/mcp", g.auth.metadata())
	if g.ops != nil {
		// Probes answer without credentials: a load balancer or kubelet has none.
		mux.Handle("/healthz", g.ops.Healthz())
		mux.Handle("/readyz", g.ops.Readyz())
		mux.Handle("/metrics", g.protect(g.ops.Metrics()))
		mux.Handle("/status", g.protect(g.ops.StatusPage()))
		mux.Handle("/status.json", g.protect(g.ops.StatusJSON()))
	}
	return mux
}

// protect wraps an endpoint that needs the client's credentials when
// http.auth is configured.
func (g *gateway) protect(h http.Handler) http.Handler { return g.auth.protect(h) }
