package gateway

import (
	"context"
	"log/slog"
	"net"
	"time"
)

// ShutdownGrace bounds how long the last steps of a shutdown may take: the
// HTTP server's, then the proxy's (its calls in flight, then its
// instances).
const ShutdownGrace = 10 * time.Second

// Serve serves g on ln (over HTTPS when https: the edge's TLS config is
// what serves it) until the first load fails (loaded sends a code other
// than 0), ctx ends (a stop signal), an operator's POST /drain, or the
// server fails; then it shuts down in order and returns the exit code: the
// failed load's, 1 for a server that failed, else 0.
//
// The order is the point. A stop signal or POST /drain first drains (out
// of the balancer's rotation, the calls in flight let finish); then the
// listen streams get their final result while the server still writes to
// them; then the HTTP server shuts down, which closes ln and ends the
// sessions; last the proxy closes, and with it every upstream.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener, https bool, loaded <-chan int, log *slog.Logger) int {
	errc := make(chan error, 1)
	go func() { errc <- g.Edge.Serve(ln, g.Handler()) }()
	// Tests and scripts read this line to learn the port.
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	log.Info("listening", "url", scheme+ln.Addr().String()+"/mcp")

	code, why := g.wait(ctx, loaded, errc, log)
	if code == 0 && g.Drain != nil {
		g.Drain.Begin(why)
		g.Drain.Wait(why == whySignal)
	}
	log.Info("shutting down")
	g.Proxy.EndListeners()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	_ = g.Edge.Shutdown(sctx)
	// Shutdown closes the listeners the server serves on; ln is closed
	// here too, should the server not have begun serving on it yet (a
	// first load that fails at once).
	_ = ln.Close()
	pctx, cancelProxy := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancelProxy()
	g.Proxy.Close(pctx)
	return code
}

// whySignal is why a drain begins on a stop signal.
const whySignal = "stop signal"

// wait returns when serving is to end: with the exit code of a first load
// that failed or of a server that failed, or with 0 and why the drain
// begins (a stop signal or POST /drain).
func (g *Gateway) wait(ctx context.Context, loaded <-chan int, errc <-chan error, log *slog.Logger) (int, string) {
	var drain <-chan struct{} // nil: no POST /drain to wait for
	if g.Drain != nil {
		drain = g.Drain.Requested()
	}
	for {
		select {
		case code := <-loaded:
			if code != 0 {
				return code, ""
			}
			loaded = nil // started: serve until told to stop
		case <-ctx.Done():
			return 0, whySignal
		case <-drain:
			return 0, "POST /drain"
		case err := <-errc:
			log.Error("http server failed", "err", err)
			return 1, ""
		}
	}
}
