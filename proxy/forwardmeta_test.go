package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUpstreamParams(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"no _meta", `{"name":"a"}`, `{"name":"a"}`},
		{"nothing kept back", `{"name":"a","_meta":{"x":1,"progressToken":2}}`, `{"name":"a","_meta":{"x":1,"progressToken":2}}`},
		{"lease key", `{"_meta":{"x":1,"mcp-aggregator/lease":"l"},"name":"a"}`, `{"_meta":{"x":1},"name":"a"}`},
		{"only kept-back keys", `{"name":"a","_meta":{"mcp-aggregator/lease":"l","io.modelcontextprotocol/v":{}}}`, `{"name":"a"}`},
		{"escaped key", `{"name":"a","_meta":{"mcp-aggregator\/lease":"l","y":[1]}}`, `{"name":"a","_meta":{"y":[1]}}`},
		{"escaped other member", `{"na\u006de":"\u00e9","_meta":{"mcp-aggregator/lease":"l"}}`, `{"name":"\u00e9"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := json.RawMessage(c.in)
			out := upstreamParams(in, requestMeta(in))
			assert.JSONEq(t, c.want, string(out))
			if c.in == c.want {
				assert.Equal(t, c.in, string(out), "params with nothing kept back go up byte for byte")
			}
		})
	}
	t.Run("not an object", func(t *testing.T) {
		in := json.RawMessage(`[1]`)
		assert.Equal(t, `[1]`, string(upstreamParams(in, map[string]json.RawMessage{"mcp-aggregator/lease": json.RawMessage(`"l"`)})))
	})
}
