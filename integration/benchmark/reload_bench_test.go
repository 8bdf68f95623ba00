package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// reloadDebounce is how long the aggregator lets a config change settle before it
// reloads (cmd/mcp-aggregator: reloadDebounce).
const reloadDebounce = 200 * time.Millisecond

// reloadTarget is how soon after the debounce a filter-only change should reach clients;
// reloads slower than that are counted in %-late.
const reloadTarget = 100 * time.Millisecond

// notificationTimeout bounds the wait for one tools/list_changed.
const notificationTimeout = 10 * time.Second

// BenchmarkReload measures the time from saving the config file to the client receiving
// notifications/tools/list_changed, for a filter-only change: each iteration toggles one
// tool in the demo server's whitelist, so the upstream keeps running and only the catalog
// changes. It reports the mean total (ms/reload), the mean time after the 200 ms debounce
// (ms-after-debounce), the p50 and p99 totals, and the share of reloads that took more
// than 100 ms after the debounce (%-late). Recommended: -benchtime=50x.
func BenchmarkReload(b *testing.B) {
	b.Run("filter-only", func(b *testing.B) {
		path := writeConfig(b, reloadConfig(0))
		c, log := dialStdioAggregator(b, path)
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		// The first list waits for the initial load, so the watch is running after it.
		if _, err := c.request(ctx, "tools/list", json.RawMessage(`{}`)); err != nil {
			b.Fatal(err)
		}
		samples := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			drain(c.notes)
			start := time.Now()
			if err := replaceConfig(path, reloadConfig(i+1)); err != nil {
				b.Fatal(err)
			}
			if err := awaitNote(c, "notifications/tools/list_changed", notificationTimeout); err != nil {
				b.Fatalf("reload %d: %v; aggregator stderr:\n%s", i+1, err, log)
			}
			samples = append(samples, time.Since(start))
		}
		b.StopTimer()
		mean := b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(millis(mean), "ms/reload")
		b.ReportMetric(millis(mean-reloadDebounce), "ms-after-debounce")
		slices.Sort(samples)
		late := 0
		for _, d := range samples {
			if d-reloadDebounce > reloadTarget {
				late++
			}
		}
		b.ReportMetric(100*float64(late)/float64(len(samples)), "%-late")
		b.ReportMetric(millis(percentile(samples, 0.50)), "p50-ms")
		b.ReportMetric(millis(percentile(samples, 0.99)), "p99-ms")
	})
}

// drain empties a notification channel.
func drain(notes <-chan string) {
	for {
		select {
		case <-notes:
		default:
			return
		}
	}
}

// awaitNote waits for a notification with the given method.
func awaitNote(c *conn, method string, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		select {
		case m := <-c.notes:
			if m == method {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no %s within %s", method, timeout)
		}
	}
}
