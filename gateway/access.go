package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/auth"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

// Access is the gateway's http.auth: the guard in force, replaced when a
// reload changes http.auth, and the rule that a gateway reachable from
// other hosts is never left without one by accident.
type Access struct {
	log     *slog.Logger
	addr    string // the --http address, for messages
	foreign bool   // bound to an address other hosts can reach
	open    bool   // --allow-unauthenticated
	guard   atomic.Pointer[auth.Guard]
	// edge is the MCP endpoint, once served: the sessions of clients whose
	// credentials a reload withdraws are ended there.
	edge atomic.Pointer[downstream.HTTP]
}

// NewAccess is the http.auth of a gateway serving on addr (the --http
// address); allowUnauthenticated is --allow-unauthenticated. No guard is in
// force until Start.
func NewAccess(log *slog.Logger, addr string, allowUnauthenticated bool) *Access {
	return &Access{log: log, addr: addr, foreign: !LoopbackBind(addr), open: allowUnauthenticated}
}

// Start applies the config read before the gateway listens. It refuses a
// non-loopback bind without http.auth unless --allow-unauthenticated was
// given, and one whose config cannot be read, since it cannot tell then.
func (a *Access) Start(ws *config.Workspace, problems []config.Problem) error {
	if ws == nil {
		if !a.foreign || a.open {
			return nil // the first load reports the problems
		}
		for _, p := range problems {
			if p.Severity == config.SeverityError {
				a.log.Error(p.String())
			}
		}
		return fmt.Errorf("the config has errors (above), so whether http.auth protects %s cannot be told; fix them before serving on a non-loopback address", a.addr)
	}
	if a.foreign && !ws.HTTP.Auth.Enabled() {
		if !a.open {
			return fmt.Errorf("refusing to serve on %s, a non-loopback address, without http.auth: anyone who reaches it could use every server; "+
				"set http.auth (tokens or oauth) in the config, bind to 127.0.0.1, or pass --allow-unauthenticated if something in front of the gateway authenticates", a.addr)
		}
		a.log.Warn("serving on a non-loopback address without http.auth (--allow-unauthenticated): anyone who reaches it can use every server",
			"addr", a.addr, "fix", "set http.auth in the config")
	}
	a.Apply(ws)
	return nil
}

// Apply follows a loaded workspace's http.auth. A guard whose settings did
// not change is kept, with the keys it fetched. A reload that would leave a
// non-loopback gateway without authentication is not followed.
func (a *Access) Apply(ws *config.Workspace) {
	cfg := ws.HTTP.Auth
	cur := a.guard.Load()
	if !cfg.Enabled() {
		if cur == nil {
			return
		}
		if a.foreign && !a.open {
			a.log.Error("the config no longer sets http.auth, but the gateway listens on a non-loopback address; keeping the previous authentication",
				"addr", a.addr, "fix", "restore http.auth, or restart with --allow-unauthenticated")
			return
		}
		a.guard.Store(nil)
		a.log.Warn("http.auth removed: the gateway now serves every client without authentication")
		a.endWithdrawn(cur, cfg)
		return
	}
	opts := auth.Options{Tokens: cfg.Tokens, Logger: a.log}
	if o := cfg.OAuth; o != nil {
		opts.OAuth = &auth.OAuth{Issuer: o.Issuer, Audience: o.Audience, RequiredScopes: o.RequiredScopes}
	}
	if cur.Same(opts) {
		return
	}
	g := auth.NewFrom(cur, opts) // the issuer's keys stay if only the static tokens changed
	a.guard.Store(g)
	a.endWithdrawn(cur, cfg)
	mode := []string{}
	if len(cfg.Tokens) > 0 {
		mode = append(mode, fmt.Sprintf("%d static token(s)", len(cfg.Tokens)))
	}
	if cfg.OAuth != nil {
		mode = append(mode, "OAuth access tokens of "+cfg.OAuth.Issuer)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			g.Prefetch(ctx) // a wrong issuer shows in the log now, not at the first request
		}()
	}
	a.log.Info("http.auth: clients authenticate with "+strings.Join(mode, " or "), "clients", len(cfg.Tokens))
}

// endWithdrawn ends the sessions of the clients that authenticated under
// the guard old and cannot with cfg: a static token removed or changed
// (whoever held the old one keeps no stream open), OAuth turned off for an
// OAuth client, or http.auth removed for every one. A session is bound to
// its client, so none of them could be used again anyway.
func (a *Access) endWithdrawn(old *auth.Guard, cfg config.Auth) {
	edge := a.edge.Load()
	if old == nil || edge == nil {
		return
	}
	oldTokens := old.Tokens()
	gone := func(client string) bool {
		if !cfg.Enabled() {
			return true
		}
		if tok, static := oldTokens[client]; static {
			return cfg.Tokens[client] != tok
		}
		return cfg.OAuth == nil
	}
	if n := edge.EndSessionsOf(gone, "its client's credentials were withdrawn (http.auth changed)"); n > 0 {
		a.log.Info("ended the sessions of clients whose credentials were withdrawn", "sessions", n)
	}
}

// protect wraps an endpoint that needs the client's credentials when
// http.auth is set. The Authorization header stops here: nothing behind
// the gateway ever sees a client's token.
func (a *Access) protect(h http.Handler) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := a.guard.Load()
		if g == nil {
			r.Header.Del("Authorization")
			h.ServeHTTP(w, r)
			return
		}
		who, f := g.Authenticate(r)
		if f != nil {
			f.Write(w)
			return
		}
		r.Header.Del("Authorization")
		h.ServeHTTP(w, r.WithContext(identity.WithCaller(r.Context(), who)))
	})
}

// metadata serves the RFC 9728 protected resource metadata while OAuth is
// configured (404 otherwise). It needs no credentials: it is how a client
// learns where to get them.
func (a *Access) metadata() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var g *auth.Guard
		if a != nil {
			g = a.guard.Load()
		}
		doc, ok := g.Metadata()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Header().Set("Access-Control-Allow-Origin", "*") // public metadata, read by browser-based clients
		_, _ = w.Write(doc)
	})
}
