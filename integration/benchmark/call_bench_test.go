package benchmark

import (
	"context"
	"fmt"
	"testing"
)

// echoText is the argument of every benchmarked call: a short text, as most tool
// arguments are.
const echoText = "hello, upstream"

// inflightLevels are the numbers of calls kept in flight at once.
var inflightLevels = []int{1, 16}

// BenchmarkCall measures tools/call echo made to an upstream directly and the same call
// made through the aggregator, in the same run, for three pairs of downstream and upstream
// transport:
//
//	stdio-stdio  client spawns "demo-server tools" / client spawns the aggregator over stdio, which spawns it
//	http-stdio   client spawns "demo-server tools" / client talks HTTP to the aggregator, which spawns it
//	http-http    client talks HTTP to a Go upstream / client talks HTTP to the aggregator, which talks HTTP to it
//
// Each sub-benchmark reports calls/s and the p50 and p99 latency; proxied/direct of calls/s
// is the aggregator's throughput ratio. Recommended: -benchtime=3000x.
func BenchmarkCall(b *testing.B) {
	client := newHTTPClient()
	pairs := []struct {
		name            string
		direct, proxied func(b *testing.B, upstreamURL string) *conn
		httpUpstream    bool
	}{
		{
			name:   "stdio-stdio",
			direct: dialDemo,
			proxied: func(b *testing.B, _ string) *conn {
				c, _ := dialStdioAggregator(b, writeConfig(b, renderConfig(demoTools("demo"))))
				return c
			},
		},
		{
			name:   "http-stdio",
			direct: dialDemo,
			proxied: func(b *testing.B, _ string) *conn {
				a := startHTTPAggregator(b, writeConfig(b, renderConfig(demoTools("demo"))))
				return dialHTTP(b, client, a.url)
			},
		},
		{
			name:         "http-http",
			httpUpstream: true,
			direct: func(b *testing.B, url string) *conn {
				return dialHTTP(b, client, url)
			},
			proxied: func(b *testing.B, url string) *conn {
				a := startHTTPAggregator(b, writeConfig(b, renderConfig(httpEcho("remote", url))))
				return dialHTTP(b, client, a.url)
			},
		},
	}
	params := callParams("echo", echoText)
	for _, pair := range pairs {
		b.Run(pair.name, func(b *testing.B) {
			var url string
			if pair.httpUpstream {
				url = startHTTPUpstream(b)
			}
			conns := map[string]*conn{"direct": pair.direct(b, url), "proxied": pair.proxied(b, url)}
			for kind, c := range conns {
				// The first call also waits until the aggregator has started its upstream.
				ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
				err := c.checkEcho(ctx, params, echoText)
				cancel()
				if err != nil {
					b.Fatalf("%s: %v", kind, err)
				}
			}
			for _, inflight := range inflightLevels {
				for _, kind := range []string{"direct", "proxied"} {
					b.Run(fmt.Sprintf("%s/inflight=%d", kind, inflight), func(b *testing.B) {
						measureRequests(b, conns[kind], inflight, "tools/call", params)
					})
				}
			}
		})
	}
}

// dialDemo spawns the demo tools server and connects to it directly.
func dialDemo(b *testing.B, _ string) *conn {
	return dialStdio(b, newStderrLog(), nil, binary, "demo-server", "tools")
}
