package benchmark

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// httpEdge is the aggregator's streamable-HTTP transport serving p, as "serve --http" builds
// it, and the function that shuts it down.
func httpEdge(p *proxy.Proxy) (http.Handler, func(context.Context) error) {
	edge := downstream.NewHTTP(p, downstream.HTTPOptions{Logger: slog.New(slog.DiscardHandler)})
	return edge, edge.Shutdown
}
