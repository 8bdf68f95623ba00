package benchmark

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// replicaSessions is how many sessions each setup of BenchmarkReplicas
// runs, one call in flight on each.
const replicaSessions = 16

// replicaSetup is one way to reach the echo upstream through HAProxy.
type replicaSetup struct {
	name     string
	lb       int // HAProxy's pid
	replicas []*httpProcess
	sessions []*conn
	holder   []int // per session, the index in replicas of the one holding it
}

// BenchmarkReplicas measures tools/call echo {text} through HAProxy, configured by
// deploy/haproxy/haproxy.cfg, in front of one replica and in front of two, the setups
// taking turns within each run. Each setup runs 16 sessions with one call in flight on
// each. One op is one call on each setup. Per setup it reports <setup>-calls/s, p50 and
// p99, the CPU per call of HAProxy (<setup>-haproxy-cpu-µs/call), of the aggregator
// replicas together (<setup>-replicas-cpu-µs/call) and of each replica on the calls it
// served (<setup>-r<N>-cpu-µs/call). On a machine with fewer cores than processes a
// second replica adds no speed: the CPU per call says what a replica costs.
// Skipped when haproxy is not installed. Recommended: -benchtime=20000x -count=5.
func BenchmarkReplicas(b *testing.B) {
	exe, err := exec.LookPath("haproxy")
	if err != nil {
		b.Skip("haproxy is not installed: apt-get install haproxy")
	}
	cfg := writeConfig(b, renderConfig(echoUpstream(b, "echo")))
	first, second := startHTTPAggregator(b, cfg), startHTTPAggregator(b, cfg)
	client := newHTTPClient()
	setups := []*replicaSetup{
		// Both server lines name the same replica: one replica, the same rules.
		{name: "one", replicas: []*httpProcess{first}},
		{name: "two", replicas: []*httpProcess{first, second}},
	}
	params := callParams("echo", echoText)
	for _, s := range setups {
		last := s.replicas[len(s.replicas)-1]
		url, pid := startHAProxy(b, exe, listenAddress(b, first.url), listenAddress(b, last.url))
		s.lb = pid
		for range replicaSessions {
			c := dialHTTP(b, client, url)
			ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
			err := c.checkEcho(ctx, params, echoText)
			cancel()
			if err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
			s.sessions = append(s.sessions, c)
			s.holder = append(s.holder, heldBy(b, s.replicas, c))
		}
	}

	type tally struct {
		samples  []time.Duration
		elapsed  time.Duration
		lb       time.Duration
		replicas []time.Duration // CPU per replica
		calls    []int           // calls served per replica
	}
	tallies := make([]tally, len(setups))
	for i, s := range setups {
		tallies[i].replicas = make([]time.Duration, len(s.replicas))
		tallies[i].calls = make([]int, len(s.replicas))
		if _, _, err := spreadCalls(s, warmCalls*replicaSessions, params); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
	}
	rounds := min(callRounds, b.N)
	b.ResetTimer()
	for round := range rounds {
		n := roundShare(b.N, rounds, round)
		for k := range setups {
			i := (round + k) % len(setups)
			s, t := setups[i], &tallies[i]
			lb0, rep0 := mustCPU(b, s.lb), replicaCPU(b, s.replicas)
			start := time.Now()
			samples, perSession, err := spreadCalls(s, n, params)
			t.elapsed += time.Since(start)
			if err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
			t.lb += mustCPU(b, s.lb) - lb0
			for r, d := range replicaCPU(b, s.replicas) {
				t.replicas[r] += d - rep0[r]
			}
			for j, calls := range perSession {
				t.calls[s.holder[j]] += calls
			}
			t.samples = append(t.samples, samples...)
		}
	}
	b.StopTimer()
	for i, s := range setups {
		t := tallies[i]
		b.ReportMetric(float64(b.N)/t.elapsed.Seconds(), s.name+"-calls/s")
		reportLatency(b, t.samples, s.name+"-")
		b.ReportMetric(micros(t.lb)/float64(b.N), s.name+"-haproxy-cpu-µs/call")
		var all time.Duration
		for r, d := range t.replicas {
			all += d
			if t.calls[r] > 0 {
				b.ReportMetric(micros(d)/float64(t.calls[r]), fmt.Sprintf("%s-r%d-cpu-µs/call", s.name, r+1))
			}
		}
		b.ReportMetric(micros(all)/float64(b.N), s.name+"-replicas-cpu-µs/call")
	}
}

// spreadCalls makes n calls over the setup's sessions, one in flight on each, and
// returns the latencies and how many calls each session made.
func spreadCalls(s *replicaSetup, n int, params json.RawMessage) ([]time.Duration, []int, error) {
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	perWorker := make([][]time.Duration, len(s.sessions))
	counts := make([]int, len(s.sessions))
	var wg sync.WaitGroup
	for w, c := range s.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				start := time.Now()
				if _, err := c.request(context.Background(), "tools/call", params); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				perWorker[w] = append(perWorker[w], time.Since(start))
				counts[w]++
			}
		}()
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		return nil, nil, *err
	}
	return slices.Concat(perWorker...), counts, nil
}

func mustCPU(b *testing.B, pid int) time.Duration {
	d, err := cpuTime(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func replicaCPU(b *testing.B, replicas []*httpProcess) []time.Duration {
	out := make([]time.Duration, len(replicas))
	for i, r := range replicas {
		out[i] = mustCPU(b, r.cmd.Process.Pid)
	}
	return out
}

// heldBy asks each replica directly which one holds c's session: the holder
// answers a ping in it, the others 404.
func heldBy(b *testing.B, replicas []*httpProcess, c *conn) int {
	id := c.t.(*transport.StreamableHTTP).GetSessionId()
	for i, r := range replicas {
		req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return i
		}
	}
	b.Fatalf("no replica holds session %s", id)
	return -1
}

// listenAddress is the host:port of an aggregator's /mcp URL.
func listenAddress(b *testing.B, url string) string {
	return strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
}

// startHAProxy runs deploy/haproxy/haproxy.cfg in front of two server
// addresses until the benchmark ends, and returns its /mcp URL and pid.
func startHAProxy(b *testing.B, exe, r1, r2 string) (string, int) {
	cfg, err := filepath.Abs(filepath.Join("..", "..", "deploy", "haproxy", "haproxy.cfg"))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	front := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(exe, "-db", "-f", cfg)
	cmd.Env = append(os.Environ(), "MCP_FRONTEND="+front, "MCP_REPLICA_1="+r1, "MCP_REPLICA_2="+r2)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // its request log goes to stdout: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get("http://" + front + "/")
		if err == nil {
			resp.Body.Close()
			return "http://" + front + "/mcp", cmd.Process.Pid
		}
		select {
		case <-exited:
			b.Fatalf("haproxy exited at start: %s", stderr.String())
		case <-time.After(20 * time.Millisecond): // a port that opens has no event to wait on
		}
		if time.Now().After(deadline) {
			b.Fatalf("haproxy did not listen within %s", startTimeout)
		}
	}
}
