package telemetry

import (
	"context"
	"encoding/json"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// The _meta keys that carry W3C trace context (SEP-414). They are an
// exception to the rule that _meta keys have a prefix, shared with the
// OpenTelemetry MCP conventions and every SDK that propagates context.
const (
	MetaTraceParent = "traceparent"
	MetaTraceState  = "tracestate"
)

// Bounds on the trace context read from a client, in bytes of raw JSON.
// A version 00 traceparent is 55 characters; a tracestate holds at most 32
// members of at most 256 characters each.
const (
	maxTraceParent = 256
	maxTraceState  = 32*257 + 2
)

// Headers is the trace context a transport received beside the message:
// the HTTP traceparent and tracestate headers of the request that carried
// it. It is used only when the message's _meta has no traceparent.
type Headers struct {
	TraceParent, TraceState string
}

// w3c parses and writes traceparent and tracestate as the W3C Trace
// Context specification has them; it ignores malformed values.
var w3c propagation.TraceContext

// carrier is a set of trace context fields, as a propagator reads and writes them.
type carrier map[string]string

func (c carrier) Get(key string) string { return c[key] }
func (c carrier) Set(key, value string) { c[key] = value }
func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Remote returns the span context a request's caller sent: the _meta
// members traceparent and tracestate (JSON strings), else the transport's
// headers. A missing, oversized or malformed traceparent gives an invalid
// span context (the request then starts a trace of its own); a malformed
// tracestate is dropped and the traceparent kept.
func Remote(meta map[string]json.RawMessage, h Headers) trace.SpanContext {
	c := carrier{}
	if raw, ok := meta[MetaTraceParent]; ok {
		if s, ok := metaString(raw, maxTraceParent); ok {
			c[MetaTraceParent] = s
			if s, ok := metaString(meta[MetaTraceState], maxTraceState); ok {
				c[MetaTraceState] = s
			}
		}
	} else if h.TraceParent != "" && len(h.TraceParent) <= maxTraceParent {
		c[MetaTraceParent] = h.TraceParent
		if len(h.TraceState) <= maxTraceState {
			c[MetaTraceState] = h.TraceState
		}
	}
	if c[MetaTraceParent] == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), c))
}

// metaString decodes a JSON string of at most limit raw bytes.
func metaString(raw json.RawMessage, limit int) (string, bool) {
	if len(raw) == 0 || len(raw) > limit {
		return "", false
	}
	return rawjson.String(raw)
}

// MetaOf renders sc as the _meta members that pass it on: traceparent
// and, when sc has one, tracestate. It returns nil for an invalid sc.
func MetaOf(sc trace.SpanContext) map[string]json.RawMessage {
	if !sc.IsValid() {
		return nil
	}
	c := carrier{}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	out := make(map[string]json.RawMessage, 2)
	for k, v := range c {
		out[k] = rawjson.AppendString(nil, v)
	}
	return out
}

// WithContext returns a copy of meta in which traceparent and tracestate
// are sc's: a forwarded request's _meta then makes the upstream's spans
// children of sc. A tracestate of the caller's that sc does not carry
// (it was malformed) is dropped with it. Other members stay as they are.
func WithContext(meta map[string]json.RawMessage, sc trace.SpanContext) map[string]json.RawMessage {
	set := MetaOf(sc)
	if set == nil {
		return meta
	}
	out := make(map[string]json.RawMessage, len(meta)+2)
	maps.Copy(out, meta)
	delete(out, MetaTraceState)
	maps.Copy(out, set)
	return out
}
