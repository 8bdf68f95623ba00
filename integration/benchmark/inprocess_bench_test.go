package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// BenchmarkInProcessCall is the proxied route of BenchmarkCall with the aggregator running
// inside the benchmark process instead of as a child, so that -cpuprofile, -memprofile and
// -trace see the aggregator's code: over stdio (ServeStdio on pipes) and over streamable
// HTTP (the HTTP transport on a loopback httptest server), to the echo upstream over stdio,
// and over HTTP to it over HTTP (http-http). The upstream is still in its own process. Its figures are not comparable with BenchmarkCall, since the
// client and the aggregator share one process here; use it to find where the aggregator
// spends its time:
//
//	go test -run '^$' -bench 'InProcessCall/stdio' -benchtime 100000x -cpuprofile cpu.out -o bench.test ./integration/benchmark/
//	go tool pprof -top bench.test cpu.out
func BenchmarkInProcessCall(b *testing.B) {
	params := callParams("echo", echoText)
	httpUpstream := func(tb testing.TB) upstreamServer {
		exe, _, env := helper(tb, "echo", "http")
		return httpEcho("echo", startHTTPProcess(tb, env, exe, "echo", "http").url)
	}
	edges := []struct {
		name     string
		serve    func(tb testing.TB, p *proxy.Proxy) *conn
		upstream func(tb testing.TB) upstreamServer
	}{
		{"stdio", serveStdioInProcess, func(tb testing.TB) upstreamServer { return echoUpstream(tb, "echo") }},
		{"http", serveHTTPInProcess, func(tb testing.TB) upstreamServer { return echoUpstream(tb, "echo") }},
		{"http-http", serveHTTPInProcess, httpUpstream},
	}
	for _, edge := range edges {
		b.Run(edge.name, func(b *testing.B) {
			c := edge.serve(b, startInProcess(b, renderConfig(edge.upstream(b))))
			ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
			defer cancel()
			if err := c.checkEcho(ctx, params, echoText); err != nil {
				b.Fatal(err)
			}
			for _, inflight := range inflightLevels {
				b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
					b.ReportAllocs()
					measureRequests(b, c, inflight, "tools/call", params)
				})
			}
			if edge.name == "stdio" {
				// As a client that asks for progress calls: the token stays
				// with the aggregator, and the call gets one of its own
				// upstream. One call at a time, each with the same token.
				b.Run("progressToken/inflight=1", func(b *testing.B) {
					b.ReportAllocs()
					measureRequests(b, c, 1, "tools/call", callParamsWithMeta("echo", echoText, map[string]any{"progressToken": 1}))
				})
			}
		})
	}
}

// BenchmarkInProcessToolsList is the proxied half of BenchmarkToolsList with the
// aggregator inside the benchmark process, for profiling tools/list over 5,000 tools.
func BenchmarkInProcessToolsList(b *testing.B) {
	c := serveStdioInProcess(b, startInProcess(b, catalogConfig(b, catalogServers, catalogTools)))
	awaitCatalog(b, c, catalogServers*catalogTools+adminTools)
	b.Run(fmt.Sprintf("tools=%d", catalogServers*catalogTools), func(b *testing.B) {
		b.ReportAllocs()
		measureRequests(b, c, 1, "tools/list", json.RawMessage(`{}`))
	})
}

// startInProcess runs the aggregator on cfg inside this process, as "serve" does, until
// the benchmark ends.
func startInProcess(tb testing.TB, cfg string) *proxy.Proxy {
	tb.Helper()
	p := proxy.New(proxy.Options{Logger: slog.New(slog.DiscardHandler), Version: "benchmark"})
	ws, problems := config.LoadBytes(writeConfig(tb, cfg), []byte(cfg), os.LookupEnv)
	if ws == nil || config.HasErrors(problems) {
		tb.Fatalf("config rejected: %v", problems)
	}
	report := p.Reconcile(context.Background(), ws, problems)
	// Registered first, so it runs last: after the edges below have stopped.
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		p.Close(ctx)
	})
	if len(report.Failed) > 0 {
		tb.Fatalf("servers failed to start: %v: %v", report.Failed, report.Problems)
	}
	return p
}

// serveStdioInProcess serves p over stdio on pipes and returns a client connected to it.
func serveStdioInProcess(tb testing.TB, p *proxy.Proxy) *conn {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	toProxy, fromClient := io.Pipe()
	toClient, fromProxy := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- p.ServeStdio(ctx, toProxy, fromProxy) }()
	t := transport.NewIO(toClient, fromClient, io.NopCloser(eofReader{}))
	if err := t.Start(ctx); err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = fromClient.Close() // the aggregator sees EOF, as when an IDE exits
		select {
		case <-served:
		case <-time.After(stopTimeout):
			tb.Errorf("ServeStdio did not return within %s of EOF", stopTimeout)
		}
		cancel()
		_ = t.Close()
	})
	c := newConn(t)
	hctx, hcancel := context.WithTimeout(ctx, setupTimeout)
	defer hcancel()
	if err := c.handshake(hctx); err != nil {
		tb.Fatal(err)
	}
	return c
}

// serveHTTPInProcess serves p over streamable HTTP at /mcp on a loopback port and returns
// a client with a session there.
func serveHTTPInProcess(tb testing.TB, p *proxy.Proxy) *conn {
	tb.Helper()
	edge, shutdown := httpEdge(p)
	mux := http.NewServeMux()
	mux.Handle("/mcp", edge)
	srv := httptest.NewServer(mux)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		_ = shutdown(ctx)
		srv.Close()
	})
	return dialHTTP(tb, newHTTPClient(), srv.URL+"/mcp")
}

// eofReader is the stderr of an in-process server: there is none.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
