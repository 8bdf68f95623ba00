package telemetry

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientParent = "00f067aa0ba902b7"
	clientTP     = "00-" + clientTrace + "-" + clientParent + "-01"
)

func raw(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

func TestRemote(t *testing.T) {
	traceID, _ := trace.TraceIDFromHex(clientTrace)
	spanID, _ := trace.SpanIDFromHex(clientParent)
	for _, tc := range []struct {
		name       string
		meta       map[string]json.RawMessage
		headers    Headers
		valid      bool
		sampled    bool
		tracestate string
	}{
		{name: "traceparent in _meta", meta: map[string]json.RawMessage{"traceparent": raw(clientTP)}, valid: true, sampled: true},
		{name: "with tracestate", meta: map[string]json.RawMessage{"traceparent": raw(clientTP), "tracestate": raw("vendor=value,other=1")},
			valid: true, sampled: true, tracestate: "vendor=value,other=1"},
		{name: "not sampled", meta: map[string]json.RawMessage{"traceparent": raw("00-" + clientTrace + "-" + clientParent + "-00")}, valid: true},
		{name: "escaped JSON string", meta: map[string]json.RawMessage{"traceparent": json.RawMessage(`"00-` + clientTrace + `-` + clientParent + `-\u0030\u0031"`)},
			valid: true, sampled: true},
		{name: "malformed tracestate dropped, traceparent kept",
			meta: map[string]json.RawMessage{"traceparent": raw(clientTP), "tracestate": raw("not a tracestate")}, valid: true, sampled: true},
		{name: "header fallback", headers: Headers{TraceParent: clientTP, TraceState: "a=b"}, valid: true, sampled: true, tracestate: "a=b"},
		{name: "_meta wins over the header", meta: map[string]json.RawMessage{"traceparent": raw(clientTP)},
			headers: Headers{TraceParent: "00-11111111111111111111111111111111-2222222222222222-01"}, valid: true, sampled: true},

		{name: "none"},
		{name: "number", meta: map[string]json.RawMessage{"traceparent": json.RawMessage(`42`)}},
		{name: "object", meta: map[string]json.RawMessage{"traceparent": json.RawMessage(`{"a":1}`)}},
		{name: "upper case hex", meta: map[string]json.RawMessage{"traceparent": raw(strings.ToUpper(clientTP))}},
		{name: "all-zero trace id", meta: map[string]json.RawMessage{"traceparent": raw("00-00000000000000000000000000000000-" + clientParent + "-01")}},
		{name: "all-zero span id", meta: map[string]json.RawMessage{"traceparent": raw("00-" + clientTrace + "-0000000000000000-01")}},
		{name: "version ff", meta: map[string]json.RawMessage{"traceparent": raw("ff-" + clientTrace + "-" + clientParent + "-01")}},
		{name: "too short", meta: map[string]json.RawMessage{"traceparent": raw("00-abc-def-01")}},
		{name: "oversized", meta: map[string]json.RawMessage{"traceparent": raw(clientTP + strings.Repeat("-x", 200))}},
		{name: "malformed _meta value, no header fallback", meta: map[string]json.RawMessage{"traceparent": raw("garbage")},
			headers: Headers{TraceParent: clientTP}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := Remote(tc.meta, tc.headers)
			require.Equal(t, tc.valid, sc.IsValid())
			if !tc.valid {
				return
			}
			assert.True(t, sc.IsRemote())
			assert.Equal(t, tc.sampled, sc.IsSampled())
			assert.Equal(t, tc.tracestate, sc.TraceState().String())
			if tc.name != "header fallback" {
				assert.Equal(t, traceID, sc.TraceID())
				assert.Equal(t, spanID, sc.SpanID())
			}
		})
	}
}

func TestWithContext(t *testing.T) {
	traceID, _ := trace.TraceIDFromHex(clientTrace)
	spanID, _ := trace.SpanIDFromHex("1111111111111111")
	state, err := trace.ParseTraceState("vendor=value")
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, TraceState: state})

	in := map[string]json.RawMessage{
		"traceparent": raw(clientTP), "tracestate": raw("stale=1"), "baggage": raw("k=v"),
		"custom": json.RawMessage(`{"big":12345678901234567890}`),
	}
	out := WithContext(in, sc)
	assert.Equal(t, raw(clientTP), in["traceparent"], "the caller's map is not changed")

	var got map[string]any
	b, err := json.Marshal(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, map[string]any{
		"traceparent": "00-" + clientTrace + "-1111111111111111-01",
		"tracestate":  "vendor=value",
		"baggage":     "k=v",
		"custom":      map[string]any{"big": 12345678901234567890.0},
	}, got)
	assert.Equal(t, `{"big":12345678901234567890}`, string(out["custom"]), "other members keep their bytes")

	// A context without tracestate drops the caller's.
	bare := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID})
	out = WithContext(in, bare)
	assert.NotContains(t, out, "tracestate")
	assert.Equal(t, "00-"+clientTrace+"-1111111111111111-00", mustString(t, out["traceparent"]))

	// An invalid context changes nothing.
	assert.Equal(t, in, WithContext(in, trace.SpanContext{}))
	assert.Nil(t, MetaOf(trace.SpanContext{}))

	// Round trip: what is written reads back as the same context.
	back := Remote(WithContext(nil, sc), Headers{})
	assert.Equal(t, sc.TraceID(), back.TraceID())
	assert.Equal(t, sc.SpanID(), back.SpanID())
	assert.Equal(t, sc.TraceFlags(), back.TraceFlags())
	assert.Equal(t, sc.TraceState().String(), back.TraceState().String())
}

func mustString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s))
	return s
}

// FuzzRemote feeds arbitrary request params through the path a request's
// trace context takes: reading _meta, parsing it, writing it on. Nothing
// may panic; a context that parses must survive a round trip unchanged.
func FuzzRemote(f *testing.F) {
	for _, seed := range []string{
		`{"name":"echo","_meta":{"traceparent":"` + clientTP + `"}}`,
		`{"_meta":{"traceparent":"` + clientTP + `","tracestate":"a=b,c=d"}}`,
		`{"_meta":{"traceparent":"00-` + clientTrace + `-` + clientParent + `-\u0030\u0031"}}`,
		`{"_meta":{"traceparent":42,"tracestate":null}}`,
		`{"_meta":null}`,
		`{"_meta":{"traceparent":"00-00000000000000000000000000000000-0000000000000000-00"}}`,
		`{"_meta":{"traceparent":"cc-` + clientTrace + `-` + clientParent + `-01-future"}}`,
		`[1,2]`,
		`{"_meta":{"traceparent":"` + "\xff\xfe" + `"}}`,
	} {
		f.Add([]byte(seed), "")
	}
	f.Add([]byte(`{}`), clientTP)
	f.Fuzz(func(t *testing.T, params []byte, header string) {
		p := readParams(params)
		sc := Remote(p.meta, Headers{TraceParent: header})
		if !sc.IsValid() {
			return
		}
		meta := MetaOf(sc)
		for k, v := range meta {
			if !json.Valid(v) {
				t.Fatalf("%s written as invalid JSON: %q", k, v)
			}
		}
		back := Remote(meta, Headers{})
		if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || back.TraceFlags() != sc.TraceFlags() ||
			back.TraceState().String() != sc.TraceState().String() {
			t.Fatalf("round trip changed the context: %v -> %v", sc, back)
		}
	})
}
