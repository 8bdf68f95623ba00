package proxy

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/stretchr/testify/require"
)

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkToolsCall is one tools/call through Handle as a stdio session's
// call of a shared stateless server's tool arrives, with and without a
// progress token, and of a stateful server's tool, on the session's lease:
// the proxy's whole work around the upstream's round trip.
// Its allocs/op and cpu-µs/call are the proxy's and the upstream
// connection's alone (the request is made once; no transport, no client;
// the demo server runs in another process), the CPU time its system calls
// included; ns/op is mostly the demo server's.
func BenchmarkToolsCall(b *testing.B) {
	p := newTestProxy(b)
	reconcile(b, p, load(b, b.TempDir(), baseServers()))
	s := fakeSession("bench")
	p.SessionOpened(s) // as the transport opens it: its leases live while it does
	b.Cleanup(func() { p.SessionClosed(s) })
	for _, bench := range []struct{ name, params string }{
		{"plain", `{"name":"demo_echo","arguments":{"text":"hello"}}`},
		{"progressToken", `{"name":"demo_echo","arguments":{"text":"hello"},"_meta":{"progressToken":1}}`},
		{"leased", `{"name":"ctr_get","arguments":{}}`},
	} {
		b.Run(bench.name, func(b *testing.B) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			req := &downstream.Request{
				Msg:      &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(bench.params)},
				Session:  s,
				Protocol: "2025-11-25",
				Send:     func(*jsonrpc.Message) bool { return true },
				Cancel:   cancel,
			}
			if resp := p.Handle(ctx, req); resp == nil || resp.Error != nil {
				b.Fatalf("call failed: %+v", resp)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for b.Loop() {
				if resp := p.Handle(ctx, req); resp == nil || resp.Error != nil {
					b.Fatalf("call failed: %+v", resp)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/call")
		})
	}
}

// BenchmarkBridgesTask is bridgesTask's decision for a tools/call of a
// 2026-07-28 client that declares the tasks extension, to a tool of a
// 2025-11-25 server that declares task-augmented tools/call and whose
// definition lets the tool run as a task: what such a call asks of the
// tool's entry and its server.
func BenchmarkBridgesTask(b *testing.B) {
	p := newTestProxy(b)
	reconcile(b, p, load(b, b.TempDir(), baseServers()))
	rs := *p.current().servers["tools"]
	rs.caps.Tasks, rs.caps.Raw = true, json.RawMessage(`{"tools":{"listChanged":true},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`)
	rs.taskCalls = tasksCall(rs.caps)
	names := []string{"report"}
	defs := map[string]json.RawMessage{"report": json.RawMessage(`{"name":"report","title":"Quarterly report",` +
		`"description":"Builds the quarterly report of one region, from the ledger and the forecasts, as a PDF.",` +
		`"inputSchema":{"type":"object","properties":{"region":{"type":"string","description":"the region's code"},` +
		`"quarter":{"type":"integer","minimum":1,"maximum":4},"year":{"type":"integer"},"format":{"type":"string","enum":["pdf","html"]}},` +
		`"required":["region","quarter","year"]},"annotations":{"readOnlyHint":true},"execution":{"taskSupport":"optional"}}`)}
	_, entries := catalog.Plan(rs.cfg, names, defs, catalog.Empty(), "")
	require.Len(b, entries, 1)
	grant, err := rs.pool.AcquireAs(context.Background(), session.Key{}, "")
	require.NoError(b, err)
	defer grant.Done()
	if protocol.Modern(grant.Instance.Protocol()) {
		b.Skip("the demo server speaks the 2026-07-28 protocol: no call of it is bridged")
	}
	req := &downstream.Request{Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(`{"extensions":{"` + TasksExtension + `":{}}}`)}
	require.True(b, p.bridgesTask(req, &rs, grant.Instance, entries[0]))
	b.ReportAllocs()
	for b.Loop() {
		if !p.bridgesTask(req, &rs, grant.Instance, entries[0]) {
			b.Fatal("the call is not bridged")
		}
	}
}
