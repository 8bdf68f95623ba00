package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// Catalog size of the tools/list benchmark: 50 servers of 100 tools each.
const (
	catalogServers = 50
	catalogTools   = 100
	// adminTools is mcp_release and mcp_status, which every catalog also holds.
	adminTools = 2
)

// loadTimeout bounds how long the aggregator may take to start the 50 upstreams.
const loadTimeout = 2 * time.Minute

// BenchmarkToolsList measures tools/list over stdio with 5,000 tools: "proxied" through
// the aggregator fronting 50 upstreams of 100 tools each, "direct" from one upstream that
// serves all 5,000 itself, which shows what the client and the transport alone cost for a
// list that size. ns/op is the latency of one list, as seen by a client that reads the
// whole response. Recommended: -benchtime=300x.
func BenchmarkToolsList(b *testing.B) {
	total := catalogServers * catalogTools
	b.Run(fmt.Sprintf("tools=%d", total), func(b *testing.B) {
		exe, args, env := helper(b, "tools", strconv.Itoa(total))
		direct := dialStdio(b, newStderrLog(), env, exe, args...)
		proxied, log := dialStdioAggregator(b, writeConfig(b, catalogConfig(b, catalogServers, catalogTools)))
		sizes := map[string]int{
			"direct":  awaitCatalog(b, direct, total),
			"proxied": awaitCatalog(b, proxied, total+adminTools),
		}
		for kind, c := range map[string]*conn{"direct": direct, "proxied": proxied} {
			b.Run(kind, func(b *testing.B) {
				measureRequests(b, c, 1, "tools/list", json.RawMessage(`{}`))
				b.ReportMetric(float64(sizes[kind]), "bytes/list")
			})
		}
		if b.Failed() {
			b.Logf("aggregator stderr:\n%s", log)
		}

		lines, lineLog := startLineClient(b, writeConfig(b, catalogConfig(b, catalogServers, catalogTools)))
		size := awaitLineCatalog(b, lines, total+adminTools, lineLog)
		b.Run("proxied-lineclient", func(b *testing.B) {
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := lines.roundTrip("tools/list", "{}"); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			reportLatency(b, samples, "")
			b.ReportMetric(float64(size), "bytes/list")
		})
	})
}

// awaitLineCatalog is awaitCatalog for a lineClient.
func awaitLineCatalog(b *testing.B, c *lineClient, want int, log *stderrLog) int {
	b.Helper()
	deadline := time.Now().Add(loadTimeout)
	for {
		line, err := c.roundTrip("tools/list", "{}")
		if err != nil {
			b.Fatalf("%v; aggregator stderr:\n%s", err, log)
		}
		have, err := countTools(line)
		if err != nil {
			b.Fatal(err)
		}
		if have == want {
			return len(line)
		}
		if have > want || time.Now().After(deadline) {
			b.Fatalf("the catalog holds %d tools, want %d", have, want)
		}
		// No notification reaches this client's reader between requests, so it
		// looks again after a short pause.
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitCatalog lists tools until the catalog holds want tools (upstreams that start late
// arrive with tools/list_changed) and returns the size of the list in bytes.
func awaitCatalog(b *testing.B, c *conn, want int) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	have := 0
	for {
		res, err := c.request(ctx, "tools/list", json.RawMessage(`{}`))
		if err != nil {
			b.Fatalf("waiting for %d tools (have %d): %v", want, have, err)
		}
		var list struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &list); err != nil {
			b.Fatal(err)
		}
		if list.NextCursor != "" {
			b.Fatalf("tools/list is paginated (nextCursor %q); the benchmark measures one page", list.NextCursor)
		}
		have = len(list.Tools)
		if have == want {
			return len(res)
		}
		if have > want {
			b.Fatalf("the catalog holds %d tools, want %d", have, want)
		}
		select {
		case <-c.notes: // a server arrived, or a poll is due
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			b.Fatalf("waiting for %d tools: only %d after %s", want, have, loadTimeout)
		}
	}
}
