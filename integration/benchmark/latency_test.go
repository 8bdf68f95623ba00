package benchmark

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// measureRequests sends b.N requests over c, inflight at a time, and reports throughput
// (calls/s) and latency percentiles (p50-µs, p99-µs) alongside ns/op.
func measureRequests(b *testing.B, c *conn, inflight int, method string, params json.RawMessage) {
	b.Helper()
	b.ResetTimer()
	samples, err := sendRequests(c, b.N, inflight, method, params)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	reportLatency(b, samples, "")
}

// sendRequests sends n requests over c, inflight at a time, and returns the latency of
// each, unsorted. It stops at the first error.
func sendRequests(c *conn, n, inflight int, method string, params json.RawMessage) ([]time.Duration, error) {
	ctx := context.Background()
	perWorker := make([][]time.Duration, inflight)
	for w := range perWorker {
		perWorker[w] = make([]time.Duration, 0, n/inflight+1)
	}
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				start := time.Now()
				if _, err := c.request(ctx, method, params); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				perWorker[w] = append(perWorker[w], time.Since(start))
			}
		}()
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		return nil, *err
	}
	return slices.Concat(perWorker...), nil
}

// reportLatency reports the median and 99th percentile of samples in microseconds, as
// p50-µs and p99-µs after prefix.
func reportLatency(b *testing.B, samples []time.Duration, prefix string) {
	slices.Sort(samples)
	b.ReportMetric(micros(percentile(samples, 0.50)), prefix+"p50-µs")
	b.ReportMetric(micros(percentile(samples, 0.99)), prefix+"p99-µs")
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the smallest sample that at least q of the sorted samples do not
// exceed (the nearest-rank method); zero for no samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps float error in q*n (0.99*100 = 99.00000000000001) from
	// moving the rank up by one.
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	cases := []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one sample", []time.Duration{7}, 0.99, 7},
		{"median of 100", hundred, 0.50, 50},
		{"p99 of 100", hundred, 0.99, 99},
		{"max", hundred, 1, 100},
		{"median of 3", []time.Duration{1, 2, 3}, 0.5, 2},
		{"p99 of 3 is the largest", []time.Duration{1, 2, 3}, 0.99, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, percentile(tc.samples, tc.q))
		})
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\tmcp-aggregator\nVmPeak:\t  812344 kB\nVmRSS:\t   15360 kB\nThreads:\t9\n"
	got, err := parseRSS([]byte(status))
	assert.NoError(t, err)
	assert.Equal(t, int64(15360), got)
	_, err = parseRSS([]byte("Name:\tx\n"))
	assert.Error(t, err)
}
