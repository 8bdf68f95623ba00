package upstream

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
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
		{"every _meta, should it repeat", `{"_meta":{"progressToken":1},"a":2,"_meta":{}}`,
			`{"_meta":{"progressToken":"agg-7"},"a":2,"_meta":{"progressToken":"agg-7"}}`},
		{"every token, should it repeat", `{"_meta":{"progressToken":1,"k":[],"progressToken":2}}`,
			`{"_meta":{"progressToken":"agg-7","k":[],"progressToken":"agg-7"}}`},
		{"space kept", ` { "_meta" : { } , "a" : 1 } `, ` { "_meta" : {"progressToken":"agg-7" } , "a" : 1 } `},
		{"space kept, no _meta", ` { } `, ` {"_meta":{"progressToken":"agg-7"} } `},
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

// withProgressTokenBySet is withProgressToken written with rawjson.Set, one
// member at a time: what the one pass must agree with.
func withProgressTokenBySet(params, token json.RawMessage) (json.RawMessage, bool) {
	if len(bytes.TrimSpace(params)) == 0 {
		return append(append([]byte(`{"_meta":{"progressToken":`), token...), "}}"...), true
	}
	return rawjson.Set(params, "_meta", func(meta []byte) []byte {
		if out, ok := rawjson.Set(meta, "progressToken", func([]byte) []byte { return token }); ok {
			return out
		}
		return append(append([]byte(`{"progressToken":`), token...), '}')
	})
}

func FuzzWithProgressToken(f *testing.F) {
	for _, seed := range []string{``, `{}`, ` { } `, `{"_meta":{"progressToken":1}}`, `{"_meta":null,"_meta":{"a":1}}`,
		`{"a":{"_meta":1},"_meta":{"progressToken":1,"progressToken":{}}}`, `{"_m\u0065ta":[]}`, `[1]`, `{"a":}`} {
		f.Add([]byte(seed))
	}
	token := json.RawMessage(`"agg-7"`)
	f.Fuzz(func(t *testing.T, params []byte) {
		got, ok := withProgressToken(params, token)
		want, wantOK := withProgressTokenBySet(params, token)
		require.Equal(t, wantOK, ok, "%q", params)
		if ok {
			require.Equal(t, string(want), string(got), "%q", params)
		}
	})
}

func TestProgressKeyOf(t *testing.T) {
	for _, c := range []struct {
		raw  string
		key  int64
		want bool
	}{
		{`"agg-1"`, 1, true},
		{`"agg-1234567890"`, 1234567890, true},
		{`"agg-\u0031"`, 1, true}, // escapes mean what they say
		{`"agg-01"`, 0, false},    // never written with a leading zero
		{`"agg-0"`, 0, false},
		{`"agg-"`, 0, false},
		{`"agg-1x"`, 0, false},
		{`"agg--1"`, 0, false},
		{`"Agg-1"`, 0, false},
		{`1`, 0, false},
		{`"1"`, 0, false},
		{`"agg-1234567890123456789"`, 0, false},
		{``, 0, false},
	} {
		key, ok := progressKeyOf([]byte(c.raw))
		assert.Equal(t, c.want, ok, c.raw)
		assert.Equal(t, c.key, key, c.raw)
		if ok {
			assert.Equal(t, `"agg-`+strconv.FormatInt(c.key, 10)+`"`, string(appendProgressToken(nil, key)))
		}
	}
}
