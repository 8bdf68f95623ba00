package main

import (
	"log/slog"
	"net/http"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// gateway assembles what `serve --http` answers: the MCP endpoint and the
// operations endpoints beside it.
type gateway struct {
	edge  *downstream.HTTP
	proxy *proxy.Proxy
	log   *slog.Logger
}

// handler routes every path the gateway serves.
func (g *gateway) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.protect(g.edge))
	return mux
}

// protect wraps an endpoint that needs the client's credentials when
// http.auth is configured.
func (g *gateway) protect(h http.Handler) http.Handler { return h }
