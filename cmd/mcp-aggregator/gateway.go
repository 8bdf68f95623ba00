package main

import (
	"fmt"
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

// probePaths are the probes handler serves: a client at its connection
// cap may still ask for them (downstream.HTTPOptions.ProbePaths), as a
// load balancer whose address carries every client's connections does.
func probePaths() []string { return []string{"/healthz", "/readyz"} }

// handler routes every path the gateway serves.
func (g *gateway) handler() http.Handler {
	mux := http.NewServeMux()
	if g.auth != nil {
		g.auth.edge.Store(g.edge) // sessions of withdrawn clients end there
	}
	// A browser page of an allowed origin gets its CORS preflight answered
	// before authentication: a browser sends no credentials with one. A
	// foreign Host or Origin is refused before authentication too.
	mux.Handle("/mcp", g.edge.CORS(g.guard(g.protect(g.edge))))
	if g.drain != nil {
		// Operators only: see drainer.endpoint.
		mux.Handle("/drain", g.guard(g.drain.endpoint(g.auth)))
	}
	// How an OAuth client learns where to get a token: open by nature, to
	// web pages as well.
	mux.Handle(auth.WellKnownPath, g.auth.metadata())
	mux.Handle(auth.WellKnownPath+"/mcp", g.auth.metadata())
	if g.ops != nil {
		// Probes answer without credentials: a load balancer or kubelet has none.
		mux.Handle("/healthz", g.guard(g.ops.Healthz()))
		mux.Handle("/readyz", g.guard(g.probe(g.ops.Readyz(), g.ops.ReadyzBrief())))
		mux.Handle("/metrics", g.guard(g.protect(g.unrestricted(g.ops.Metrics()))))
		mux.Handle("/status", g.guard(g.protect(g.unrestricted(g.ops.StatusPage()))))
		mux.Handle("/status.json", g.guard(g.protect(g.unrestricted(g.ops.StatusJSON()))))
	}
	return mux
}

// guard refuses what the MCP endpoint refuses under a foreign Host or
// Origin (downstream.HTTP.Guard).
func (g *gateway) guard(h http.Handler) http.Handler {
	if g.edge == nil {
		return h
	}
	return g.edge.Guard(h)
}

// protect wraps an endpoint that needs the client's credentials when
// http.auth is configured.
func (g *gateway) protect(h http.Handler) http.Handler { return g.auth.protect(h) }

// unrestricted wraps a view of the whole gateway (every server, its tools,
// problems and instances): a client whose profile narrows what it sees is
// refused it, as mcp_status shows such a client its own servers only.
func (g *gateway) unrestricted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if client := downstream.ClientOf(r.Context()); client != "" && g.proxy != nil && g.proxy.Restricted(client) {
			http.Error(w, fmt.Sprintf("client %q has a profile (profiles.%s), which shows it only some servers, and this page shows every one; "+
				"read it with the token of a client without a profile, or use the mcp_status tool", client, client), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// probe serves an endpoint open to callers without credentials (a load
// balancer's probe) in two forms: full to a client that authenticates and
// has no profile, brief to anyone else while http.auth is set. No caller
// is refused, and a probe without credentials is not logged.
func (g *gateway) probe(full, brief http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var guard *auth.Guard
		if g.auth != nil {
			guard = g.auth.guard.Load()
		}
		if guard == nil {
			full.ServeHTTP(w, r)
			return
		}
		client, f := guard.Authenticate(r)
		if f != nil || (g.proxy != nil && g.proxy.Restricted(client)) {
			brief.ServeHTTP(w, r)
			return
		}
		full.ServeHTTP(w, r)
	})
}
