package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// TestEncode: the one result encoder adds, in one pass, what a
// 2026-07-28 result owes its client (resultType, the aggregator's name in
// _meta, the caching hints of lists), takes an upstream's name out of an
// earlier generation's result, and keeps every other byte.
func TestEncode(t *testing.T) {
	const info = `{"name":"agg","version":"1"}`
	const si = `"io.modelcontextprotocol/serverInfo":` + info
	p := &Proxy{modernEdits: resultEdits(json.RawMessage(info))}
	cases := []struct {
		name, protocol, method, in, want string
	}{
		{"no _meta", "2026-07-28", "tools/call", `{"a":1}`, `{"resultType":"complete","_meta":{` + si + `},"a":1}`},
		{"empty result", "2026-07-28", "ping", `{}`, `{"resultType":"complete","_meta":{` + si + `}}`},
		{"a list is cacheable", "2026-07-28", "tools/list", `{"tools":[]}`, `{"resultType":"complete","_meta":{` + si + `},"ttlMs":0,"cacheScope":"private","tools":[]}`},
		{"a read is cacheable", "2026-07-28", "resources/read", `{"contents":[]}`, `{"resultType":"complete","_meta":{` + si + `},"ttlMs":0,"cacheScope":"private","contents":[]}`},
		{"an upstream's hints and resultType kept", "2026-07-28", "resources/read", `{"ttlMs":5,"resultType":"input_required","cacheScope":"public"}`,
			`{"_meta":{` + si + `},"ttlMs":5,"resultType":"input_required","cacheScope":"public"}`},
		{"other members kept byte for byte", "2026-07-28", "tools/call", `{"_meta":{"big":18446744073709551615, "x":[1, 2]},"a":1}`,
			`{"resultType":"complete","_meta":{` + si + `,"big":18446744073709551615, "x":[1, 2]},"a":1}`},
		{"an upstream's name replaced in place", "2026-07-28", "tools/call", `{"_meta":{"k":0,"io.modelcontextprotocol/serverInfo":{"name":"up","version":"9"},"k":1}}`,
			`{"resultType":"complete","_meta":{"k":0,` + si + `,"k":1}}`},
		{"null _meta", "2026-07-28", "tools/call", `{"_meta":null,"a":1}`, `{"resultType":"complete","_meta":{` + si + `},"a":1}`},
		{"removed for an earlier generation", "2025-11-25", "tools/call", `{"_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"up"}},"a":1}`, `{"_meta":{"k":1},"a":1}`},
		{"nothing to remove", "2025-11-25", "tools/list", `{"_meta":{"k": 1},"a":1}`, `{"_meta":{"k": 1},"a":1}`},
		{"nothing to remove, no _meta", "2025-06-18", "tools/call", `{"a":1}`, `{"a":1}`},
		{"not an object", "2026-07-28", "tools/call", `[1]`, `[1]`},
		{"invalid", "2026-07-28", "tools/call", `{"a":`, `{"a":`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(c.in)
			req := &downstream.Request{Msg: &jsonrpc.Message{Method: c.method}, Protocol: c.protocol}
			got := p.encode(req, &jsonrpc.Message{Result: in})
			assert.Equal(t, c.want, string(got.Result))
			assert.Equal(t, c.in, string(in), "the input is not written to")
		})
	}
	req := &downstream.Request{Msg: &jsonrpc.Message{Method: "tools/call"}, Protocol: "2026-07-28"}
	assert.Nil(t, p.encode(req, nil))
	failed := jsonrpc.Failure(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no"))
	assert.Same(t, failed, p.encode(req, failed), "an error is no result")
	assert.Empty(t, failed.Result)
}
