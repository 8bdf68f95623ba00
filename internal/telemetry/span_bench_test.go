package telemetry

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// discard is an exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracedCall is what tracing adds to one tools/call when it is on:
// the request's span from a client traceparent, the upstream call's span
// and the _meta it sends, both ended and batched for export.
func BenchmarkTracedCall(b *testing.B) {
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{})))
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	params := json.RawMessage(`{"name":"demo_echo","arguments":{"text":"hello"},"_meta":{"traceparent":"` + clientTP + `","progressToken":7}}`)
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`)
	meta := map[string]json.RawMessage{"traceparent": raw(clientTP)}
	b.ReportAllocs()
	for b.Loop() {
		ctx, req := tr.StartRequest(context.Background(), Request{Method: "tools/call", ID: json.RawMessage(`12`), Params: params, Session: "0123456789abcdef", Protocol: "2025-11-25"})
		_, up := tr.StartUpstream(ctx, Upstream{Method: "tools/call", Tool: "echo", Server: "demo", Transport: "stdio", PID: 42})
		_ = up.Meta(meta)
		up.End(result, nil, nil)
		req.EndMessage(&jsonrpc.Message{Result: result})
	}
}
