package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWithMeta(t *testing.T) {
	members := map[string]json.RawMessage{
		"traceparent": json.RawMessage(`"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"`),
		"tracestate":  json.RawMessage(`"v=1"`),
	}
	const tp = `"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"`
	tests := []struct {
		name   string
		params string
		want   string // "" when params cannot take them
	}{
		{"no params", ``, `{"_meta":{` + tp + `,"tracestate":"v=1"}}`},
		{"no _meta: added, the rest untouched", `{"uri":"a://b", "n" : 12345678901234567890}`,
			`{"_meta":{` + tp + `,"tracestate":"v=1"},"uri":"a://b", "n" : 12345678901234567890}`},
		{"the caller's values replaced in place, others kept", `{"_meta":{"tracestate":"old","traceparent":"x","baggage":"k=v"},"name":"p"}`,
			`{"_meta":{"tracestate":"v=1",` + tp + `,"baggage":"k=v"},"name":"p"}`},
		{"a _meta that is not an object is replaced", `{"_meta":7}`, `{"_meta":{` + tp + `,"tracestate":"v=1"}}`},
		{"not an object", `"s"`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := withMeta(json.RawMessage(tc.params), members)
			if tc.want == "" {
				assert.False(t, ok, "%s", got)
				return
			}
			require.True(t, ok)
			assert.JSONEq(t, tc.want, string(got))
			if tc.name == "no _meta: added, the rest untouched" || tc.name == "the caller's values replaced in place, others kept" {
				assert.Equal(t, tc.want, string(got), "the other bytes stay")
			}
		})
	}
}
