package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/auth"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/ops"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// Gateway assembles what `serve --http` answers: the MCP endpoint and the
// operations endpoints beside it.
type Gateway struct {
	Edge   *downstream.HTTP // the MCP endpoint
	Proxy  *proxy.Proxy
	Ops    *ops.Ops // probes, metrics and the status page; nil: none served
	Access *Access  // http.auth (access.go); nil: nothing to check
	Drain  *Drainer // SIGTERM and POST /drain (drain.go); nil: no /drain
	// LoginCallback is where the browser comes back from the per-user
	// logins the gateway offers (config.LoginCallbackPath); nil: none.
	LoginCallback http.Handler
	// Logout ends the caller's own per-user logins (config.LogoutPath),
	// behind the credentials /mcp takes; nil: not served.
	Logout http.Handler
	// ClientMetadata serves the aggregator's client ID metadata documents,
	// each at its own path, and answers 404 to every other path the mux
	// does not route; nil: none served.
	ClientMetadata http.Handler
}

// ProbePaths are the probes Handler serves: a client at its connection
// cap may still ask for them (downstream.HTTPOptions.ProbePaths), as a
// load balancer whose address carries every client's connections does.
func ProbePaths() []string { return []string{"/healthz", "/readyz"} }

// Handler routes every path the gateway serves.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	if g.Access != nil {
		g.Access.edge.Store(g.Edge) // sessions of withdrawn clients end there
	}
	// A browser page of an allowed origin gets its CORS preflight answered
	// before authentication: a browser sends no credentials with one. A
	// foreign Host or Origin is refused before authentication too. The
	// endpoint checks each once, around authentication (Endpoint).
	endpoint := g.Edge.Endpoint(g.protect)
	mux.Handle("/mcp", endpoint)
	// views.<name> at /mcp/<name>: the same endpoint, a narrower catalog.
	mux.Handle("/mcp/", g.Edge.Endpoint(func(h http.Handler) http.Handler { return g.protect(g.view(h)) }))
	if g.Drain != nil {
		// Operators only: see Drainer.endpoint.
		mux.Handle("/drain", g.guard(g.Drain.endpoint(g.Access)))
	}
	// How an OAuth client learns where to get a token: open by nature, to
	// web pages as well.
	mux.Handle(auth.WellKnownPath, g.Access.metadata())
	mux.Handle(auth.WellKnownPath+"/mcp", g.Access.metadata())
	// Each view's document (RFC 9728 §3.1, /mcp/<view> the resource's
	// path). Served for any name a view may have, configured or not, so
	// that it tells no one which views exist; the resource it names is the
	// gateway's, whose tokens serve every view.
	mux.Handle(auth.WellKnownPath+"/mcp/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !auth.ViewName(strings.TrimPrefix(r.URL.Path, auth.WellKnownPath+"/mcp/")) {
			http.NotFound(w, r)
			return
		}
		g.Access.metadata().ServeHTTP(w, r)
	}))
	if g.LoginCallback != nil {
		// A browser coming back from an authorization server has no
		// credentials of ours: the login's state is what it must match.
		mux.Handle(config.LoginCallbackPath, g.LoginCallback)
	}
	if g.Logout != nil {
		// Whose logins end is who the credentials name, as on /mcp.
		mux.Handle(config.LogoutPath, g.guard(g.protect(g.Logout)))
	}
	if g.ClientMetadata != nil {
		// An authorization server fetches these without credentials, from
		// the public name the gateway is reached by: no guard, no auth.
		mux.Handle("/", g.ClientMetadata)
	}
	if g.Ops != nil {
		// Probes answer without credentials: a load balancer or kubelet has none.
		mux.Handle("/healthz", g.guard(g.Ops.Healthz()))
		mux.Handle("/readyz", g.guard(g.probe(g.Ops.Readyz(), g.Ops.ReadyzBrief())))
		mux.Handle("/metrics", g.guard(g.protect(g.unrestricted(g.Ops.Metrics()))))
		mux.Handle("/status", g.guard(g.protect(g.unrestricted(g.Ops.StatusPage()))))
		mux.Handle("/status.json", g.guard(g.protect(g.unrestricted(g.Ops.StatusJSON()))))
	}
	return mcpFirst(endpoint, mux)
}

// mcpFirst routes a request for exactly /mcp, every call of every client,
// to endpoint without the mux's pattern match, as the mux would route it
// (a clean path, no CONNECT: nothing to redirect); any other to the mux.
func mcpFirst(endpoint http.Handler, mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" && r.URL.RawPath == "" && r.Method != http.MethodConnect {
			r.Pattern = "/mcp"
			endpoint.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// view serves /mcp/<name> as the MCP endpoint of the view name (see
// downstream.WithView); 404 for a name that is no view.
func (g *Gateway) view(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/mcp/")
		if name == "" || strings.Contains(name, "/") || g.Proxy == nil || !g.Proxy.HasView(name) {
			http.Error(w, "no such view: the views are the names under views: in the config", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r.WithContext(downstream.WithView(r.Context(), name)))
	})
}

// guard refuses what the MCP endpoint refuses under a foreign Host or
// Origin (downstream.HTTP.Guard).
func (g *Gateway) guard(h http.Handler) http.Handler {
	if g.Edge == nil {
		return h
	}
	return g.Edge.Guard(h)
}

// protect wraps an endpoint that needs the client's credentials when
// http.auth is configured.
func (g *Gateway) protect(h http.Handler) http.Handler { return g.Access.protect(h) }

// unrestricted wraps a view of the whole gateway (every server, its tools,
// problems and instances): a client whose profile narrows what it sees is
// refused it, as mcp_status shows such a client its own servers only.
func (g *Gateway) unrestricted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if who := identity.CallerOf(r.Context()); who.Principal.Authenticated() && g.Proxy != nil {
			if profile, restricted := g.Proxy.Restricted(who); restricted {
				http.Error(w, fmt.Sprintf("%s has a profile (profiles.%s), which shows it only some servers, and this page shows every one; "+
					"read it with the token of a client without a profile, or use the mcp_status tool", who.Principal, profile), http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// probe serves an endpoint open to callers without credentials (a load
// balancer's probe) in two forms: full to a client that authenticates and
// has no profile, brief to anyone else while http.auth is set. No caller
// is refused, and a probe without credentials is not logged.
func (g *Gateway) probe(full, brief http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var guard *auth.Guard
		if g.Access != nil {
			guard = g.Access.guard.Load()
		}
		if guard == nil {
			full.ServeHTTP(w, r)
			return
		}
		who, f := guard.Authenticate(r)
		restricted := false
		if f == nil && g.Proxy != nil {
			_, restricted = g.Proxy.Restricted(who)
		}
		if f != nil || restricted {
			brief.ServeHTTP(w, r)
			return
		}
		full.ServeHTTP(w, r)
	})
}
