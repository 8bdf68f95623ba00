package upstream

import (
	"encoding/json"
	"testing"
)

// BenchmarkCallParams encodes a tools/call's params as real clients send
// them: with a progress token in _meta, which stays with the aggregator.
func BenchmarkCallParams(b *testing.B) {
	for _, c := range []struct{ name, params string }{
		{"meta=none", `{"name":"srv_echo","arguments":{"text":"hi"}}`},
		{"meta=progressToken", `{"name":"srv_echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}`},
		{"meta=progressToken+key", `{"name":"srv_echo","arguments":{"text":"hi"},"_meta":{"progressToken":1,"traceparent":"00-1-2-01"}}`},
		{"meta=key", `{"name":"srv_echo","arguments":{"text":"hi"},"_meta":{"traceparent":"00-1-2-01"}}`},
	} {
		call := Call{Name: "echo", Params: json.RawMessage(c.params), Arguments: json.RawMessage(`{"text":"hi"}`), Withhold: withheldForTest}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeCallParams(call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
