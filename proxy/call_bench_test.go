package proxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// BenchmarkToolsCall is one tools/call through Handle as a stdio session's
// call of a shared stateless server's tool arrives, with and without a
// progress token, and of a stateful server's tool, on the session's lease:
// the proxy's whole work around the upstream's round trip.
// Its allocs/op are the proxy's and the upstream connection's alone (the
// request is made once; no transport, no client); its time is mostly the
// demo server's, in another process: profile it (-cpuprofile) and read the
// proxy's share.
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
			for b.Loop() {
				if resp := p.Handle(ctx, req); resp == nil || resp.Error != nil {
					b.Fatalf("call failed: %+v", resp)
				}
			}
		})
	}
}
