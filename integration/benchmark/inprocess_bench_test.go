package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// BenchmarkInProcessCall is BenchmarkCall/stdio-stdio/proxied with the aggregator running
// inside the benchmark process (proxy.New and ServeStdio over pipes) instead of as a child,
// so that -cpuprofile, -memprofile and -trace see the aggregator's code. The upstream is
// still the demo server in its own process. Its figures are not comparable with
// BenchmarkCall, since the client and the aggregator share one process here; use it to
// find where the aggregator spends its time:
//
//	go test -run '^$' -bench InProcessCall -benchtime 20000x -cpuprofile cpu.out ./integration/benchmark/
//	go tool pprof -top cpu.out
func BenchmarkInProcessCall(b *testing.B) {
	c := serveInProcess(b, renderConfig(demoTools("demo")))
	params := callParams("echo", echoText)
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
}

// BenchmarkInProcessToolsList is the proxied half of BenchmarkToolsList with the
// aggregator inside the benchmark process, for profiling tools/list over 5,000 tools.
func BenchmarkInProcessToolsList(b *testing.B) {
	c := serveInProcess(b, catalogConfig(b, catalogServers, catalogTools))
	awaitCatalog(b, c, catalogServers*catalogTools+adminTools)
	b.Run(fmt.Sprintf("tools=%d", catalogServers*catalogTools), func(b *testing.B) {
		b.ReportAllocs()
		measureRequests(b, c, 1, "tools/list", json.RawMessage(`{}`))
	})
}

// serveInProcess runs the aggregator on cfg inside this process, as "serve" does over
// stdio, and returns a client connected to it through pipes.
func serveInProcess(tb testing.TB, cfg string) *conn {
	tb.Helper()
	log := slog.New(slog.DiscardHandler)
	p := proxy.New(proxy.Options{Logger: log, Version: "benchmark"})
	ws, problems := config.LoadBytes(writeConfig(tb, cfg), []byte(cfg), os.LookupEnv)
	if ws == nil || config.HasErrors(problems) {
		tb.Fatalf("config rejected: %v", problems)
	}
	ctx, cancel := context.WithCancel(context.Background())
	report := p.Reconcile(ctx, ws, problems)
	if len(report.Failed) > 0 {
		cancel()
		tb.Fatalf("servers failed to start: %v: %v", report.Failed, report.Problems)
	}

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
		cctx, ccancel := context.WithTimeout(context.Background(), stopTimeout)
		defer ccancel()
		p.Close(cctx)
	})
	c := newConn(t)
	hctx, hcancel := context.WithTimeout(ctx, setupTimeout)
	defer hcancel()
	if err := c.handshake(hctx); err != nil {
		tb.Fatal(err)
	}
	return c
}

// eofReader is the stderr of an in-process server: there is none.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
