package integration

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// The trace context a client sends with its call, as SEP-414 puts it in _meta.
const (
	otelClientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	otelClientParent = "00f067aa0ba902b7"
	otelClientTP     = "00-" + otelClientTrace + "-" + otelClientParent + "-01"
)

// otlpSpan is an exported span with the service.name of its resource.
type otlpSpan struct {
	*tracepb.Span
	service string
}

func (s otlpSpan) traceID() string  { return hex.EncodeToString(s.TraceId) }
func (s otlpSpan) spanID() string   { return hex.EncodeToString(s.SpanId) }
func (s otlpSpan) parentID() string { return hex.EncodeToString(s.ParentSpanId) }

// attr returns the value of a span attribute as text ("" when absent).
func (s otlpSpan) attr(key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return json.Number(itoa(v.IntValue)).String()
		}
	}
	return ""
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every
// ExportTraceServiceRequest posted to /v1/traces and keeps its spans.
type otlpReceiver struct {
	url     string
	mu      sync.Mutex
	spans   []otlpSpan
	changed chan struct{}
	bad     []string // what it could not decode
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		assert.Empty(t, r.bad, "exports the receiver could not decode")
	})
	r.url = srv.URL
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	fail := func(why string) {
		r.mu.Lock()
		r.bad = append(r.bad, why)
		r.mu.Unlock()
		http.Error(w, why, http.StatusBadRequest)
	}
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		fail(req.Method + " " + req.URL.Path)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		fail("Content-Type " + ct)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, 16<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			fail(err.Error())
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		fail(err.Error())
		return
	}
	var export collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &export); err != nil {
		fail(err.Error())
		return
	}
	r.add(&export)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// add keeps the spans of one export.
func (r *otlpReceiver) add(export *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, otlpSpan{Span: s, service: service})
			}
		}
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// grpcTraces is the receiver's OTLP/gRPC trace service.
type grpcTraces struct {
	collectortrace.UnimplementedTraceServiceServer
	r *otlpReceiver
}

func (g grpcTraces) Export(_ context.Context, export *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.r.add(export)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// newOTLPGRPCReceiver is an OTLP/gRPC trace receiver on a loopback port; its
// url has the http scheme, which tells the exporter to dial without TLS.
func newOTLPGRPCReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{changed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, grpcTraces{r: r})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	r.url = "http://" + ln.Addr().String()
	return r
}

func (r *otlpReceiver) snapshot() ([]otlpSpan, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...), r.changed
}

// waitTrace waits until the receiver holds a span named server whose trace
// is traceID and a span that is its child, and returns both.
func (r *otlpReceiver) waitTrace(t *testing.T, traceID, name string) (server, upstream otlpSpan) {
	t.Helper()
	deadline := time.After(callTimeout)
	for {
		spans, changed := r.snapshot()
		for _, s := range spans {
			if s.traceID() != traceID || s.Name != name || s.Kind != tracepb.Span_SPAN_KIND_SERVER {
				continue
			}
			for _, c := range spans {
				if c.traceID() == traceID && c.parentID() == s.spanID() {
					return s, c
				}
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no span %q with an upstream child in trace %s arrived within %s; spans: %v", name, traceID, callTimeout, spans)
		}
	}
}

// otelConfig fronts the demo server "surface", whose tool meta answers
// with the _meta it received.
func otelConfig() string {
	return "version: 1\nservers:\n  surface:\n    truely-stateless: true\n    " + demoServer("surface") + "\n"
}

// receivedMeta calls meta with _meta and returns the _meta the upstream got.
func receivedMeta(t *testing.T, c *client, meta map[string]any) map[string]any {
	t.Helper()
	resp := c.mustRequest("tools/call", map[string]any{"name": "meta", "arguments": map[string]any{}, "_meta": meta})
	require.Empty(t, resp.Error, "tools/call meta")
	var result struct {
		StructuredContent struct {
			Meta map[string]any `json:"meta"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &result))
	return result.StructuredContent.Meta
}

// parseTraceContext reads W3C trace context with OpenTelemetry's own parser.
func parseTraceContext(t *testing.T, traceparent, tracestate any) trace.SpanContext {
	t.Helper()
	tp, _ := traceparent.(string)
	ts, _ := tracestate.(string)
	carrier := propagation.MapCarrier{"traceparent": tp, "tracestate": ts}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	require.True(t, sc.IsValid(), "traceparent %q is not valid W3C trace context", tp)
	return sc
}

// TestOTelTraces runs the aggregator with an OTLP endpoint, makes a call
// with the client's trace context in _meta, and checks the spans the
// receiver got and the trace context the upstream got.
func TestOTelTraces(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		receiver := newOTLPReceiver(t)
		a := startAggregator(t, tr, aggregatorOptions{configs: []string{writeConfig(t, otelConfig())}, env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.url, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_SERVICE_NAME=aggregator-under-test", "OTEL_BSP_SCHEDULE_DELAY=50",
		}})
		c := a.connect()

		got := receivedMeta(t, c, map[string]any{"traceparent": otelClientTP, "tracestate": "vendor=value", "baggage": "k=v", "custom": 1})
		upstreamSC := parseTraceContext(t, got["traceparent"], got["tracestate"])
		assert.Equal(t, otelClientTrace, upstreamSC.TraceID().String(), "the upstream continues the client's trace")
		assert.NotEqual(t, otelClientParent, upstreamSC.SpanID().String(), "under the aggregator's span, not the client's")
		assert.True(t, upstreamSC.IsSampled())
		assert.Equal(t, "vendor=value", upstreamSC.TraceState().String())
		assert.Equal(t, "k=v", got["baggage"], "baggage passes through")
		assert.Equal(t, float64(1), got["custom"], "other _meta members pass through")

		server, up := receiver.waitTrace(t, otelClientTrace, "tools/call meta")
		assert.Equal(t, "aggregator-under-test", server.service)
		assert.Equal(t, otelClientParent, server.parentID(), "the request's span is a child of the client's")
		assert.Equal(t, "tools/call", server.attr("mcp.method.name"))
		assert.Equal(t, "meta", server.attr("gen_ai.tool.name"))
		assert.NotEmpty(t, server.attr("jsonrpc.request.id"))
		assert.Equal(t, "2025-11-25", server.attr("mcp.protocol.version"))
		session := server.attr("mcp.session.id")
		if tr == httpTransport {
			full := coreSessionOf(t, c)
			assert.Equal(t, downstream.SessionDigest(full), session, "the session as the logs show it, never its id")
		} else {
			assert.Equal(t, downstream.SessionDigest("stdio"), session, "the session as the logs show it")
		}
		assert.Empty(t, server.attr("error.type"))

		assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, up.Kind)
		assert.Equal(t, "tools/call meta", up.Name)
		assert.Equal(t, upstreamSC.SpanID().String(), up.spanID(), "the upstream got the upstream call's span as its parent")
		assert.Equal(t, "surface", up.attr("mcp_aggregator.upstream.server"))
		assert.Equal(t, "stdio", up.attr("mcp_aggregator.upstream.transport"))
		assert.Equal(t, "pipe", up.attr("network.transport"))
		assert.Equal(t, "shared", up.attr("mcp_aggregator.upstream.lease"))
		assert.NotEmpty(t, up.attr("mcp_aggregator.upstream.pid"))
		assert.GreaterOrEqual(t, up.EndTimeUnixNano, up.StartTimeUnixNano)
		assert.LessOrEqual(t, server.StartTimeUnixNano, up.StartTimeUnixNano, "the upstream call runs inside the request")
		assert.GreaterOrEqual(t, server.EndTimeUnixNano, up.EndTimeUnixNano)

		// A malformed traceparent is ignored: the request starts a trace of
		// its own, and the upstream is part of that one.
		got = receivedMeta(t, c, map[string]any{"traceparent": "00-not-a-trace-01"})
		own := parseTraceContext(t, got["traceparent"], nil)
		assert.NotEqual(t, otelClientTrace, own.TraceID().String())
		server, _ = receiver.waitTrace(t, own.TraceID().String(), "tools/call meta")
		assert.Empty(t, server.ParentSpanId, "a root span")

		// An upstream error is recorded on both spans.
		resp := c.mustRequest("tools/call", map[string]any{"name": "meta", "arguments": map[string]any{},
			"_meta": map[string]any{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}})
		require.Empty(t, resp.Error)
		resp = c.mustRequest("tools/call", map[string]any{"name": "no_such_tool",
			"_meta": map[string]any{"traceparent": "00-33333333333333333333333333333333-2222222222222222-01"}})
		require.NotEmpty(t, resp.Error)
		var rpcErr struct{ Code int }
		require.NoError(t, json.Unmarshal(resp.Error, &rpcErr))
		failed := receiver.waitSpan(t, func(s otlpSpan) bool { return s.traceID() == "33333333333333333333333333333333" })
		assert.Equal(t, itoa(int64(rpcErr.Code)), failed.attr("error.type"))
		assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, failed.Status.GetCode())

		if tr == httpTransport {
			// No _meta: the HTTP traceparent header is honoured instead.
			body := mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 900, "method": "tools/call",
				"params": map[string]any{"name": "meta", "arguments": map[string]any{}}})
			reply := corePost(t, a.url, coreSessionOf(t, c), body,
				map[string]string{"traceparent": "00-44444444444444444444444444444444-5555555555555555-01"})
			require.Equal(t, http.StatusOK, reply.status, "%s", reply.body)
			msg := coreMessage(t, reply)
			var result struct {
				StructuredContent struct {
					Meta map[string]any `json:"meta"`
				} `json:"structuredContent"`
			}
			require.NoError(t, json.Unmarshal(msg.Result, &result))
			sc := parseTraceContext(t, result.StructuredContent.Meta["traceparent"], nil)
			assert.Equal(t, "44444444444444444444444444444444", sc.TraceID().String())
			server, _ := receiver.waitTrace(t, "44444444444444444444444444444444", "tools/call meta")
			assert.Equal(t, "5555555555555555", server.parentID())
		}
	})
}

// waitSpan waits until the receiver holds a span that match accepts.
func (r *otlpReceiver) waitSpan(t *testing.T, match func(otlpSpan) bool) otlpSpan {
	t.Helper()
	deadline := time.After(callTimeout)
	for {
		spans, changed := r.snapshot()
		for _, s := range spans {
			if match(s) {
				return s
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the span waited for did not arrive within %s; spans: %v", callTimeout, spans)
		}
	}
}

// TestOTelGRPC exports over OTLP/gRPC instead of OTLP/HTTP.
func TestOTelGRPC(t *testing.T) {
	t.Parallel()
	receiver := newOTLPGRPCReceiver(t)
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{writeConfig(t, otelConfig())}, env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.url, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_BSP_SCHEDULE_DELAY=50",
	}})
	c := a.connect()
	got := receivedMeta(t, c, map[string]any{"traceparent": otelClientTP})
	sc := parseTraceContext(t, got["traceparent"], nil)
	server, up := receiver.waitTrace(t, otelClientTrace, "tools/call meta")
	assert.Equal(t, "mcp-aggregator", server.service, "the default service.name")
	assert.Equal(t, otelClientParent, server.parentID())
	assert.Equal(t, sc.SpanID().String(), up.spanID())
}

// TestOTelOffPassesTraceContext checks that with no OTLP endpoint the
// client's trace context reaches the upstream exactly as sent.
func TestOTelOffPassesTraceContext(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{writeConfig(t, otelConfig())},
		env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="}})
	c := a.connect()
	sent := map[string]any{"traceparent": otelClientTP, "tracestate": "vendor=value", "baggage": "k=v"}
	got := receivedMeta(t, c, sent)
	assertJSONEqual(t, mustJSON(t, sent), mustJSON(t, got), "the upstream's _meta is the client's")
}

// TestOTelFlushOnExit checks that spans still buffered when the aggregator
// stops are exported before it exits, and that OTEL_TRACES_SAMPLER is
// honoured (always_off: nothing exported, context still passed on).
func TestOTelFlushOnExit(t *testing.T) {
	for _, tc := range []struct {
		sampler string
		spans   bool
	}{{"parentbased_always_on", true}, {"always_off", false}} {
		t.Run(tc.sampler, func(t *testing.T) {
			t.Parallel()
			receiver := newOTLPReceiver(t)
			a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{writeConfig(t, otelConfig())}, env: []string{
				"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.url, "OTEL_TRACES_SAMPLER=" + tc.sampler,
				"OTEL_BSP_SCHEDULE_DELAY=600000", // only the flush at exit exports
			}})
			c := a.connect()
			got := receivedMeta(t, c, map[string]any{"traceparent": otelClientTP})
			sc := parseTraceContext(t, got["traceparent"], nil)
			assert.Equal(t, otelClientTrace, sc.TraceID().String())
			assert.Equal(t, tc.spans, sc.IsSampled(), "the upstream hears the sampling decision")

			require.NoError(t, a.stdin.Close()) // the client leaves: the aggregator exits
			select {
			case <-a.exited:
			case <-time.After(stopTimeout):
				t.Fatalf("the aggregator did not exit within %s of its stdin closing", stopTimeout)
			}
			spans, _ := receiver.snapshot()
			if !tc.spans {
				assert.Empty(t, spans, "always_off exports nothing")
				return
			}
			var names []string
			for _, s := range spans {
				if s.traceID() == otelClientTrace {
					names = append(names, s.Name)
				}
			}
			assert.ElementsMatch(t, []string{"tools/call meta", "tools/call meta"}, names,
				"the request's and the upstream call's spans, exported at exit")
		})
	}
}
