package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/telemetry"
)

// TestTracedRequests runs requests through a proxy that traces, against the
// demo server "surface", and checks the spans and the trace context the
// upstream got: a tools/call (its _meta rebuilt) and a forwarded
// resources/read (its _meta spliced).
func TestTracedRequests(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracer := telemetry.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { // after the proxy's close, registered later
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = tracer.Shutdown(ctx)
	})
	p := newTestProxyWith(t, Options{Tracer: tracer})
	yaml := fmt.Sprintf("version: 1\nservers:\n  surface:\n    truely-stateless: true\n    command: '%s'\n    env: { %s: surface }\n", os.Args[0], demoEnv)
	ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "mcp.yaml"), []byte(yaml), nil)
	require.NotNil(t, ws, "problems: %v", problems)
	require.Empty(t, reconcile(t, p, ws).Failed)

	const (
		clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		clientParent = "00f067aa0ba902b7"
	)
	meta := `"_meta":{"traceparent":"00-` + clientTrace + `-` + clientParent + `-01","tracestate":"v=1","baggage":"k=v"}`

	t.Run("tools/call", func(t *testing.T) {
		exp.Reset()
		resp := handle(t, p, "2025-11-25", "tools/call", `{"name":"meta","arguments":{},`+meta+`}`)
		require.Nil(t, resp.Error)
		var result struct {
			StructuredContent struct {
				Meta map[string]json.RawMessage `json:"meta"`
			} `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(resp.Result, &result))
		got := telemetry.Remote(result.StructuredContent.Meta, telemetry.Headers{})
		assert.JSONEq(t, `"k=v"`, string(result.StructuredContent.Meta["baggage"]))

		server, client := spanPair(t, exp.GetSpans())
		assert.Equal(t, "tools/call meta", server.Name)
		assert.Equal(t, clientTrace, server.SpanContext.TraceID().String())
		assert.Equal(t, clientParent, server.Parent.SpanID().String())
		assert.Equal(t, client.SpanContext.SpanID(), got.SpanID(), "the upstream's parent is the upstream call's span")
		assert.Equal(t, clientTrace, got.TraceID().String())
		assert.Equal(t, "v=1", got.TraceState().String())
	})

	t.Run("forwarded request", func(t *testing.T) {
		exp.Reset()
		resp := handle(t, p, "2025-11-25", "resources/read", `{"uri":"demo://r/1",`+meta+`}`)
		require.Nil(t, resp.Error, "%s", resp.Error)
		server, client := spanPair(t, exp.GetSpans())
		assert.Equal(t, "resources/read", server.Name)
		assert.Equal(t, clientParent, server.Parent.SpanID().String())
		assert.Equal(t, "resources/read", client.Name)
		found := false
		for _, kv := range client.Attributes {
			if kv.Key == "mcp_aggregator.upstream.server" {
				found = kv.Value.AsString() == "surface"
			}
		}
		assert.True(t, found, "the upstream span names its server: %v", client.Attributes)
	})
}

// spanPair returns the server span of a request and the client span of its
// upstream call, requiring that there are exactly these two.
func spanPair(t *testing.T, spans tracetest.SpanStubs) (server, client tracetest.SpanStub) {
	t.Helper()
	require.Len(t, spans, 2, "a request span and an upstream span")
	for _, s := range spans {
		switch s.SpanKind {
		case trace.SpanKindServer:
			server = s
		case trace.SpanKindClient:
			client = s
		}
	}
	require.Equal(t, server.SpanContext.SpanID(), client.Parent.SpanID(), "the upstream call is a child of the request")
	return server, client
}
