package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWithProgressToken(t *testing.T) {
	const token = `"agg-7"`
	tests := []struct {
		name   string
		params string
		want   string // "" when params cannot take a token
	}{
		{"no params", ``, `{"_meta":{"progressToken":"agg-7"}}`},
		{"empty object", `{}`, `{"_meta":{"progressToken":"agg-7"}}`},
		{"no _meta: added first, the rest untouched", `{"uri":"a://b", "n" : 12345678901234567890}`,
			`{"_meta":{"progressToken":"agg-7"},"uri":"a://b", "n" : 12345678901234567890}`},
		{"_meta without a token", `{"name":"t","_meta":{"k":1.50}}`, `{"name":"t","_meta":{"progressToken":"agg-7","k":1.50}}`},
		{"the caller's token replaced in place", `{"_meta":{"a":"<&>","progressToken":42,"z":[1e3]},"arguments":{"x":null}}`,
			`{"_meta":{"a":"<&>","progressToken":"agg-7","z":[1e3]},"arguments":{"x":null}}`},
		{"an escaped key is the same key", `{"_m\u0065ta":{"progress\u0054oken":"t"}}`, `{"_m\u0065ta":{"progress\u0054oken":"agg-7"}}`},
		{"a _meta that is not an object is replaced", `{"_meta":null,"a":1}`, `{"_meta":{"progressToken":"agg-7"},"a":1}`},
		{"a member named so deeper down is left alone", `{"arguments":{"_meta":{"progressToken":1}}}`,
			`{"_meta":{"progressToken":"agg-7"},"arguments":{"_meta":{"progressToken":1}}}`},
		{"not an object", `[1,2]`, ``},
		{"trailing garbage", `{"a":1} x`, ``},
		{"malformed", `{"a":}`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := withProgressToken(json.RawMessage(tc.params), json.RawMessage(token))
			if tc.want == "" {
				assert.False(t, ok, "%s", got)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.want, string(got))
		})
	}
}
