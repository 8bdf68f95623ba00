package telemetry

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// recording returns a Tracer that keeps its spans in memory.
func recording(t *testing.T) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

func attrs(s tracetest.SpanStub) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value.Emit()
	}
	return out
}

func TestRequestAndUpstreamSpans(t *testing.T) {
	tr, exp := recording(t)
	params := json.RawMessage(`{"name":"demo_echo","arguments":{"text":"hi"},"_meta":{"traceparent":"` + clientTP + `","tracestate":"vendor=value","progressToken":1}}`)
	ctx, req := tr.StartRequest(context.Background(), Request{Method: "tools/call", ID: json.RawMessage(`"call-7"`), Params: params,
		Session: "0123456789ab", Protocol: "2025-11-25", Exported: exports("demo_echo")})
	upCtx, up := tr.StartUpstream(ctx, Upstream{Method: "tools/call", Tool: "echo", Server: "demo", Transport: "stdio", PID: 4242, Protocol: "2025-11-25"})
	up.SetExportedName("demo_echo")
	assert.Equal(t, up.Context(), trace.SpanContextFromContext(upCtx))

	forwarded := up.Meta(map[string]json.RawMessage{"traceparent": raw(clientTP), "baggage": raw("k=v")})
	sent := Remote(forwarded, Headers{})
	assert.Equal(t, clientTrace, sent.TraceID().String(), "the upstream continues the client's trace")
	assert.Equal(t, up.Context().SpanID(), sent.SpanID(), "as a child of the upstream call's span")
	assert.Equal(t, "vendor=value", sent.TraceState().String(), "the client's tracestate goes on")
	assert.Equal(t, raw("k=v"), forwarded["baggage"])

	up.End(json.RawMessage(`{"content":[],"isError":true}`), nil, nil)
	req.EndMessage(&jsonrpc.Message{Result: json.RawMessage(`{"content":[],"isError":true}`)})

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	upSpan, reqSpan := spans[0], spans[1]

	assert.Equal(t, "tools/call demo_echo", reqSpan.Name)
	assert.Equal(t, trace.SpanKindServer, reqSpan.SpanKind)
	assert.Equal(t, clientTrace, reqSpan.SpanContext.TraceID().String())
	assert.Equal(t, clientParent, reqSpan.Parent.SpanID().String(), "the client's span is the parent")
	assert.True(t, reqSpan.Parent.IsRemote())
	assert.Equal(t, map[attribute.Key]string{
		"mcp.method.name": "tools/call", "jsonrpc.request.id": "call-7", "mcp.session.id": "0123456789ab",
		"mcp.protocol.version": "2025-11-25", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "demo_echo",
		"error.type": "tool_error",
	}, attrs(reqSpan))
	assert.Equal(t, codes.Error, reqSpan.Status.Code)

	assert.Equal(t, "tools/call echo", upSpan.Name)
	assert.Equal(t, trace.SpanKindClient, upSpan.SpanKind)
	assert.Equal(t, reqSpan.SpanContext.SpanID(), upSpan.Parent.SpanID())
	assert.Equal(t, map[attribute.Key]string{
		"mcp.method.name": "tools/call", "mcp_aggregator.upstream.server": "demo", "gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name": "echo", "mcp.protocol.version": "2025-11-25", "mcp_aggregator.upstream.transport": "stdio",
		"network.transport": "pipe", "mcp_aggregator.upstream.pid": "4242", "mcp_aggregator.upstream.lease": "shared",
		"mcp_aggregator.tool.exported_name": "demo_echo", "error.type": "tool_error",
	}, attrs(upSpan))
}

func TestRequestSpanOutcomes(t *testing.T) {
	tr, exp := recording(t)
	end := func(method string, params string, resp *jsonrpc.Message) tracetest.SpanStub {
		t.Helper()
		exp.Reset()
		_, s := tr.StartRequest(context.Background(), Request{Method: method, ID: json.RawMessage(`12`), Params: json.RawMessage(params),
			Exported: exports("slow", "greet", "a name with spaces that no catalog would export")})
		s.EndMessage(resp)
		spans := exp.GetSpans()
		require.Len(t, spans, 1)
		return spans[0]
	}

	s := end("tools/list", `{}`, &jsonrpc.Message{Result: json.RawMessage(`{"tools":[]}`)})
	assert.Equal(t, "tools/list", s.Name)
	assert.Equal(t, codes.Unset, s.Status.Code)
	assert.False(t, s.Parent.IsValid(), "no traceparent: a trace of its own")
	assert.Equal(t, "12", attrs(s)["jsonrpc.request.id"])

	s = end("tools/call", `{"name":"nope"}`, &jsonrpc.Message{Error: &jsonrpc.Error{Code: -32602, Message: "unknown tool \"nope\""}})
	assert.Equal(t, "-32602", attrs(s)["error.type"])
	assert.Equal(t, "-32602", attrs(s)["rpc.response.status_code"])
	assert.Equal(t, codes.Error, s.Status.Code)
	assert.Equal(t, "JSON-RPC error -32602", s.Status.Description, "the code, never the message text")

	s = end("tools/call", `{"name":"slow"}`, nil)
	assert.Equal(t, "cancelled", attrs(s)["error.type"])

	s = end("tools/call", `{"name":"a name with spaces that no catalog would export"}`, &jsonrpc.Message{Result: json.RawMessage(`{}`)})
	assert.Equal(t, "tools/call", s.Name, "an odd name stays out of the span name")
	assert.Equal(t, "a name with spaces that no catalog would export", attrs(s)["gen_ai.tool.name"])

	s = end("tools/call", `{"name":"made_up_4711"}`, &jsonrpc.Message{Error: &jsonrpc.Error{Code: -32602, Message: "unknown tool"}})
	assert.Equal(t, "tools/call", s.Name, "a name nothing exports stays out of the span name, however well formed")
	assert.Equal(t, "made_up_4711", attrs(s)["gen_ai.tool.name"])

	s = end("tools/call", `{"name":"slow"}`, &jsonrpc.Message{Result: json.RawMessage(`{}`)})
	assert.Equal(t, "tools/call slow", s.Name, "an exported tool names its span")

	s = end("prompts/get", `{"name":"greet"}`, &jsonrpc.Message{Result: json.RawMessage(`{}`)})
	assert.Equal(t, "prompts/get greet", s.Name)
	assert.Equal(t, "greet", attrs(s)["gen_ai.prompt.name"])

	s = end("resources/read", `{"uri":"postgres://admin:hunter2@db.example/x"}`, &jsonrpc.Message{Result: json.RawMessage(`{}`)})
	assert.Equal(t, "resources/read", s.Name)
	assert.Equal(t, "postgres://db.example/x", attrs(s)["mcp.resource.uri"], "no password in a span")

	s = end("ping", `{"_meta":{"traceparent":"bogus"}}`, &jsonrpc.Message{Result: json.RawMessage(`{}`)})
	assert.False(t, s.Parent.IsValid(), "a malformed traceparent is ignored")
}

func TestUpstreamSpanRemote(t *testing.T) {
	tr, exp := recording(t)
	_, s := tr.StartUpstream(context.Background(), Upstream{Method: "resources/read", Server: "remote", Transport: "streamable_http",
		URL: "https://user:secret@mcp.example.com:8443/mcp?token=abc", Dedicated: true})
	s.End(nil, nil, context.DeadlineExceeded)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	a := attrs(spans[0])
	assert.Equal(t, "mcp.example.com", a["server.address"])
	assert.Equal(t, "8443", a["server.port"])
	assert.Equal(t, "tcp", a["network.transport"])
	assert.Equal(t, "dedicated", a["mcp_aggregator.upstream.lease"])
	assert.Equal(t, "timeout", a["error.type"])
	for k, v := range a {
		assert.NotContains(t, v, "secret", k)
		assert.NotContains(t, v, "abc", k)
	}
}

func TestNilTracerDoesNothing(t *testing.T) {
	var tr *Tracer
	ctx := context.Background()
	got, req := tr.StartRequest(ctx, Request{Method: "tools/call"})
	assert.Equal(t, ctx, got)
	assert.Nil(t, req)
	got, up := tr.StartUpstream(ctx, Upstream{Method: "tools/call"})
	assert.Equal(t, ctx, got)
	assert.Nil(t, up)
	meta := map[string]json.RawMessage{"traceparent": raw(clientTP)}
	assert.Equal(t, meta, up.Meta(meta), "the client's traceparent passes unchanged")
	up.SetExportedName("x")
	up.End(nil, nil, nil)
	req.EndMessage(nil)
	assert.False(t, up.Context().IsValid())
	assert.NoError(t, tr.Shutdown(ctx))
}

func TestShortenKeepsUTF8(t *testing.T) {
	s := shorten("ééééé", 3)
	assert.Equal(t, "é", s)
	assert.Equal(t, "a\uFFFDb", shorten("a\xffb", 10))
}

// exports is a Request.Exported that knows names, whatever the method.
func exports(names ...string) func(method, name string) bool {
	return func(_, name string) bool { return slices.Contains(names, name) }
}
