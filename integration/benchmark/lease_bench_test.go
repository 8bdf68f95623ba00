package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkLease measures the first tools/call of a new HTTP session to a stateful server
// (truely-stateless: false), which leases the session a dedicated instance: "spare" with
// lease.prewarm: 1, where a ready instance is waiting, and "no-spare" with prewarm: 0,
// where the call waits for a new upstream process to start and initialize. Each iteration
// opens a new session, waits (untimed) until a spare is ready when one is configured,
// times the call, then releases the instance with mcp_release and ends the session.
// Recommended: -benchtime=50x.
func BenchmarkLease(b *testing.B) {
	for _, prewarm := range []int{1, 0} {
		name := "spare"
		if prewarm == 0 {
			name = "no-spare"
		}
		b.Run(name, func(b *testing.B) {
			a := startHTTPAggregator(b, writeConfig(b, leaseConfig(prewarm)))
			client := newHTTPClient()
			params := callParams("echo", echoText)
			release := json.RawMessage(`{"name":"mcp_release","arguments":{"serverId":"demo"}}`)
			// A first lease before timing: with prewarm 0 it takes the instance that
			// discovered the tools, which would otherwise serve as a spare once.
			lease := func(timed bool) time.Duration {
				ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
				defer cancel()
				c := dialHTTP(b, client, a.url)
				defer c.t.Close()
				if prewarm > 0 {
					if err := awaitSpare(ctx, c, "demo"); err != nil {
						b.Fatalf("%v; aggregator stderr:\n%s", err, a.log)
					}
				}
				if timed {
					b.StartTimer()
				}
				start := time.Now()
				err := c.checkEcho(ctx, params, echoText)
				took := time.Since(start)
				if timed {
					b.StopTimer()
				}
				if err != nil {
					b.Fatalf("%v; aggregator stderr:\n%s", err, a.log)
				}
				if _, err := c.request(ctx, "tools/call", release); err != nil {
					b.Fatal(err)
				}
				return took
			}
			lease(false)
			samples := make([]time.Duration, 0, b.N)
			b.StopTimer()
			b.ResetTimer()
			for range b.N {
				samples = append(samples, lease(true))
			}
			slices.Sort(samples)
			b.ReportMetric(millis(percentile(samples, 0.50)), "p50-ms")
			b.ReportMetric(millis(percentile(samples, 0.99)), "p99-ms")
		})
	}
}

// awaitSpare asks mcp_status until server has a spare instance ready.
func awaitSpare(ctx context.Context, c *conn, server string) error {
	status := json.RawMessage(`{"name":"mcp_status","arguments":{}}`)
	for {
		res, err := c.request(ctx, "tools/call", status)
		if err != nil {
			return err
		}
		var out struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(res, &out); err != nil || len(out.Content) == 0 {
			return fmt.Errorf("mcp_status: unexpected result %s", res)
		}
		var st struct {
			Servers []struct {
				ID     string `json:"id"`
				Spares int    `json:"spares"`
			} `json:"servers"`
		}
		if err := json.Unmarshal([]byte(out.Content[0].Text), &st); err != nil {
			return fmt.Errorf("mcp_status: %w", err)
		}
		for _, s := range st.Servers {
			if s.ID == server && s.Spares > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %q has no spare instance: %w", server, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}
