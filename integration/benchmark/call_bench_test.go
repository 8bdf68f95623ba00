package benchmark

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// echoText is the argument of every benchmarked call: a short text, as most tool
// arguments are.
const echoText = "hello, upstream"

// inflightLevels are the numbers of calls kept in flight at once.
var inflightLevels = []int{1, 16}

// callRounds is how many turns each route takes within one run: the routes alternate, so
// that a burst of load from elsewhere on the machine falls on all of them alike and the
// per-run ratios compare like with like.
const callRounds = 6

// warmCalls is how many untimed calls per request in flight each route makes before a
// run: enough to open every connection and start every worker the run will use.
const warmCalls = 20

// route is one way from the benchmark client to an echo upstream.
type route struct {
	name string // direct, relay, parser, transports, bridge, router, proxied, sealed, policed or audited
	c    *conn
	// hop is the pid of the process between the client and the upstream (the relay, the
	// bridge or the aggregator); 0 when there is none.
	hop int
	// upstream is the pid of the echo upstream the route ends at.
	upstream int
}

// BenchmarkCall measures tools/call echo {text} from one client to the raw-JSON echo
// upstream (echo_test.go) along several routes per pair of transports, which take turns
// within each run:
//
//	stdio-stdio  direct      client spawns the upstream, speaks stdio to it
//	             relay       client spawns a relay, which spawns the upstream and only copies bytes
//	             parser      as relay, but the hop decodes each message and maps its id
//	             transports  as parser, but through the aggregator's own two stdio transports
//	             proxied     client spawns the aggregator over stdio, which spawns the upstream
//	http-stdio   direct      as in stdio-stdio
//	             bridge      HTTP to a bridge, which writes each POST body to the upstream's stdin
//	             router      HTTP to a router, which decodes each POST, maps its id and passes it on
//	             transports  as router, but through the aggregator's own HTTP and stdio transports
//	             proxied     HTTP to the aggregator, which spawns the upstream
//	http-http    direct      HTTP to the upstream serving HTTP
//	             bridge      HTTP to a bridge, which forwards each request to the upstream
//	             proxied     HTTP to the aggregator, which speaks HTTP to the upstream
//
// The relay and the bridge (helper_test.go, bridge_test.go) are the least one more stdio
// or HTTP hop can cost. The parser (parser_test.go) is the least a stdio hop that reads
// every message can cost, and the router (router_test.go) the least an HTTP hop in front
// of a stdio upstream that routes calls can: proxied/parser and proxied/router are the
// price of what the aggregator does with a call once it has read it. The transports hops
// (transports_test.go) part that price in two: transports/parser (transports/router) is
// what the aggregator's transports cost over reading each message (decoding each
// request), proxied/transports what the aggregator does with a call beside its
// transports. One op is one call on every route. Each run reports, per route,
// <route>-calls/s, <route>-p50-µs and <route>-p99-µs; the CPU used per call by the process
// in the middle (<route>-cpu-µs/call), by the client (<route>-client-cpu-µs/call), by the
// upstream (<route>-upstream-cpu-µs/call) and by all three (<route>-total-cpu-µs/call); and
// the throughput ratios of that run: proxied/relay or proxied/bridge, proxied/direct, on
// stdio-stdio proxied/parser, proxied/transports, transports/parser and parser/relay, and
// on http-stdio proxied/router, proxied/transports, transports/router and router/bridge;
// the CPU ratios transports/<reference>-cpu and proxied/transports-cpu. Read the ratios as
// the median over -count runs, as benchstat shows them. Recommended: -benchtime=5000x
// -count=6.
func BenchmarkCall(b *testing.B) {
	client := newHTTPClient()
	pairs := []struct {
		name   string
		routes func(b *testing.B) []route
	}{
		{"stdio-stdio", func(b *testing.B) []route {
			exe, args, env := helper(b, "echo", "stdio")
			direct := dialStdio(b, newStderrLog(), env, exe, args...)
			relay := dialStdio(b, newStderrLog(), env, exe, append([]string{"relay", exe}, args...)...)
			parser := dialStdio(b, newStderrLog(), env, exe, append([]string{"parser", exe}, args...)...)
			transports := dialStdio(b, newStderrLog(), env, exe, append([]string{"transports", exe}, args...)...)
			proxied, _ := dialStdioAggregator(b, writeConfig(b, renderConfig(echoUpstream(b, "echo"))))
			return []route{
				{name: "direct", c: direct, upstream: direct.pid},
				{name: "relay", c: relay, hop: relay.pid},
				{name: "parser", c: parser, hop: parser.pid},
				{name: "transports", c: transports, hop: transports.pid},
				{name: "proxied", c: proxied, hop: proxied.pid},
			}
		}},
		{"http-stdio", func(b *testing.B) []route {
			exe, args, env := helper(b, "echo", "stdio")
			direct := dialStdio(b, newStderrLog(), env, exe, args...)
			bridge := startHTTPProcess(b, env, exe, append([]string{"bridge", exe}, args...)...)
			router := startHTTPProcess(b, env, exe, append([]string{"router", exe}, args...)...)
			transports := startHTTPProcess(b, env, exe, append([]string{"httptransports", exe}, args...)...)
			agg := startHTTPAggregator(b, writeConfig(b, renderConfig(echoUpstream(b, "echo"))))
			// The same with --session-key-file: every request carries a sealed id.
			sealed := startHTTPProcess(b, nil, binary, "serve", "--config", writeConfig(b, renderConfig(echoUpstream(b, "echo"))),
				"--http", "127.0.0.1:0", "--session-key-file", writeSessionKey(b))
			// The same with ten policy rules that every call evaluates and none
			// matches, and an audit line per call.
			policed := startHTTPAggregator(b, writeConfig(b, renderConfig(echoUpstream(b, "echo"))+auditConfig(b)+policyRules))
			// The audit log alone, to part what the rules cost from what it does.
			audited := startHTTPAggregator(b, writeConfig(b, renderConfig(echoUpstream(b, "echo"))+auditConfig(b)))
			return []route{
				{name: "direct", c: direct, upstream: direct.pid},
				{name: "bridge", c: dialHTTP(b, client, bridge.url), hop: bridge.cmd.Process.Pid},
				{name: "router", c: dialHTTP(b, client, router.url), hop: router.cmd.Process.Pid},
				{name: "transports", c: dialHTTP(b, client, transports.url), hop: transports.cmd.Process.Pid},
				{name: "proxied", c: dialHTTP(b, client, agg.url), hop: agg.cmd.Process.Pid},
				{name: "sealed", c: dialHTTP(b, client, sealed.url), hop: sealed.cmd.Process.Pid},
				{name: "policed", c: dialHTTP(b, client, policed.url), hop: policed.cmd.Process.Pid},
				{name: "audited", c: dialHTTP(b, client, audited.url), hop: audited.cmd.Process.Pid},
			}
		}},
		{"http-http", func(b *testing.B) []route {
			exe, _, env := helper(b, "echo", "http")
			upstream := startHTTPProcess(b, env, exe, "echo", "http")
			bridge := startHTTPProcess(b, env, exe, "bridge", upstream.url)
			agg := startHTTPAggregator(b, writeConfig(b, renderConfig(httpEcho("echo", upstream.url))))
			// One upstream serves the three routes, one route at a time.
			pid := upstream.cmd.Process.Pid
			return []route{
				{name: "direct", c: dialHTTP(b, client, upstream.url), upstream: pid},
				{name: "bridge", c: dialHTTP(b, client, bridge.url), hop: bridge.cmd.Process.Pid, upstream: pid},
				{name: "proxied", c: dialHTTP(b, client, agg.url), hop: agg.cmd.Process.Pid, upstream: pid},
			}
		}},
	}
	params := callParams("echo", echoText)
	for _, pair := range pairs {
		b.Run(pair.name, func(b *testing.B) {
			routes := pair.routes(b)
			for i, r := range routes {
				// The first call also waits until the aggregator has started its upstream.
				ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
				err := r.c.checkEcho(ctx, params, echoText)
				cancel()
				if err != nil {
					b.Fatalf("%s: %v", r.name, err)
				}
				if r.upstream == 0 {
					// The hop started the upstream: it is the hop's child running "echo".
					if routes[i].upstream, err = childRunning(r.hop, "echo"); err != nil {
						b.Fatalf("%s: %v", r.name, err)
					}
				}
			}
			for _, inflight := range inflightLevels {
				b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
					measureRoutes(b, routes, inflight, params)
				})
			}
		})
	}
}

// routeTally is what one route did in one run.
type routeTally struct {
	samples []time.Duration
	elapsed time.Duration // the route's own turns only
	// CPU time used during the route's turns by each process on it.
	cpu processCPU
	// System calls of the hop and of the upstream during the route's turns.
	hopIO, upstreamIO ioCount
}

// processCPU is CPU time of the three processes of a route.
type processCPU struct{ client, hop, upstream time.Duration }

func (a processCPU) sub(b processCPU) processCPU {
	return processCPU{a.client - b.client, a.hop - b.hop, a.upstream - b.upstream}
}

func (a processCPU) add(b processCPU) processCPU {
	return processCPU{a.client + b.client, a.hop + b.hop, a.upstream + b.upstream}
}

// measureRoutes makes b.N calls on every route, inflight at a time, the routes taking
// turns in callRounds rounds, and reports each route's figures and the run's ratios.
func measureRoutes(b *testing.B, routes []route, inflight int, params json.RawMessage) {
	for _, r := range routes {
		if _, err := sendRequests(r.c, warmCalls*inflight, inflight, "tools/call", params); err != nil {
			b.Fatalf("%s: %v", r.name, err)
		}
	}
	tallies := make([]routeTally, len(routes))
	rounds := min(callRounds, b.N)
	b.ResetTimer()
	for round := range rounds {
		n := roundShare(b.N, rounds, round)
		for k := range routes {
			i := (round + k) % len(routes) // each route goes first in some rounds
			r, t := routes[i], &tallies[i]
			cpu0 := routeCPU(b, r)
			hop0, up0 := processIO(b, r.hop), processIO(b, r.upstream)
			start := time.Now()
			samples, err := sendRequests(r.c, n, inflight, "tools/call", params)
			t.elapsed += time.Since(start)
			if err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			t.cpu = t.cpu.add(routeCPU(b, r).sub(cpu0))
			t.hopIO = t.hopIO.add(processIO(b, r.hop).sub(hop0))
			t.upstreamIO = t.upstreamIO.add(processIO(b, r.upstream).sub(up0))
			t.samples = append(t.samples, samples...)
		}
	}
	b.StopTimer()
	rate := make(map[string]float64, len(routes))
	hopCPU := make(map[string]time.Duration, len(routes))
	for i, r := range routes {
		t := tallies[i]
		rate[r.name] = float64(b.N) / t.elapsed.Seconds()
		hopCPU[r.name] = t.cpu.hop
		b.ReportMetric(rate[r.name], r.name+"-calls/s")
		reportLatency(b, t.samples, r.name+"-")
		perCall := func(d time.Duration) float64 { return micros(d) / float64(b.N) }
		if r.hop != 0 {
			b.ReportMetric(perCall(t.cpu.hop), r.name+"-cpu-µs/call")
			// How many messages each read and write of the hop carries: a hop
			// that moves several per system call saves its own CPU and the
			// wake-ups of the processes on either side.
			b.ReportMetric(float64(t.hopIO.reads)/float64(b.N), r.name+"-reads/call")
			b.ReportMetric(float64(t.hopIO.writes)/float64(b.N), r.name+"-writes/call")
		}
		b.ReportMetric(float64(t.upstreamIO.reads)/float64(b.N), r.name+"-upstream-reads/call")
		b.ReportMetric(perCall(t.cpu.client), r.name+"-client-cpu-µs/call")
		b.ReportMetric(perCall(t.cpu.upstream), r.name+"-upstream-cpu-µs/call")
		// What the whole route costs the machine per call: when the routes
		// keep every core busy (16 in flight on a small machine), their
		// rates go as the inverse of this.
		b.ReportMetric(perCall(t.cpu.client+t.cpu.hop+t.cpu.upstream), r.name+"-total-cpu-µs/call")
	}
	for _, r := range routes {
		if r.name != "proxied" {
			b.ReportMetric(rate["proxied"]/rate[r.name], "proxied/"+r.name)
		}
	}
	if rate["parser"] > 0 && rate["relay"] > 0 {
		// What reading every message costs a hop, against copying bytes.
		b.ReportMetric(rate["parser"]/rate["relay"], "parser/relay")
	}
	if rate["transports"] > 0 {
		// What the aggregator's transports cost, against reading every
		// message (stdio) or decoding every request (HTTP), in throughput
		// and in the hop's CPU per call; and what the aggregator does with
		// a call beside them.
		for _, ref := range []string{"parser", "router"} {
			if rate[ref] > 0 {
				b.ReportMetric(rate["transports"]/rate[ref], "transports/"+ref)
				b.ReportMetric(float64(hopCPU["transports"])/float64(hopCPU[ref]), "transports/"+ref+"-cpu")
			}
		}
		b.ReportMetric(float64(hopCPU["proxied"])/float64(hopCPU["transports"]), "proxied/transports-cpu")
	}
	if hopCPU["policed"] > 0 && hopCPU["proxied"] > 0 && hopCPU["audited"] > 0 {
		// What ten rules and the audit log cost the gateway's CPU per call,
		// and what the audit log alone does.
		b.ReportMetric(float64(hopCPU["policed"])/float64(hopCPU["proxied"]), "policed/proxied-cpu")
		b.ReportMetric(float64(hopCPU["audited"])/float64(hopCPU["proxied"]), "audited/proxied-cpu")
		b.ReportMetric(float64(hopCPU["policed"])/float64(hopCPU["audited"]), "policed/audited-cpu")
	}
	if rate["router"] > 0 && rate["bridge"] > 0 {
		// What decoding and re-iding every message costs an HTTP hop, against moving bytes.
		b.ReportMetric(rate["router"]/rate["bridge"], "router/bridge")
	}
}

// routeCPU is the CPU time used so far by each process on the route; the client is this
// process.
func routeCPU(b *testing.B, r route) processCPU {
	var cpu processCPU
	var err error
	for _, p := range []struct {
		pid int
		d   *time.Duration
	}{{os.Getpid(), &cpu.client}, {r.hop, &cpu.hop}, {r.upstream, &cpu.upstream}} {
		if p.pid == 0 {
			continue
		}
		if *p.d, err = cpuTime(p.pid); err != nil {
			b.Fatalf("%s: %v", r.name, err)
		}
	}
	return cpu
}

// writeSessionKey writes a key file of one random key for --session-key-file.
func writeSessionKey(tb testing.TB) string {
	tb.Helper()
	var k [32]byte
	_, _ = rand.Read(k[:])
	path := filepath.Join(tb.TempDir(), "session.keys")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k[:])+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// auditConfig turns the audit log on, one line per call to a file.
func auditConfig(b *testing.B) string {
	return fmt.Sprintf("audit: {to: %s}\n", yamlString(filepath.Join(b.TempDir(), "audit.jsonl")))
}

// policyRules are ten rules that read the call's tool and arguments, none
// of which matches the benchmark's calls, so each call evaluates all ten.
var policyRules = func() string {
	var c strings.Builder
	c.WriteString("policy:\n")
	for i := range 10 {
		fmt.Fprintf(&c, "  - name: rule-%d\n    when: 'tool != \"\" && has(args.text) && args.text.startsWith(\"never-%d\")'\n    action: deny\n", i, i)
	}
	return c.String()
}()

// roundShare is how many of n ops round (of rounds) runs: an even share,
// the last round taking what the division leaves.
func roundShare(n, rounds, round int) int {
	share := n / rounds
	if round == rounds-1 {
		return n - share*(rounds-1)
	}
	return share
}
