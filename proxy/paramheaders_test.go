package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// A 2026-07-28 tools/call's parameter headers must agree with its body;
// requests with no headers to check, or naming another tool (through
// mcp_call_tool), are not checked.
func TestParamHeaderMismatch(t *testing.T) {
	entry := &catalog.Entry{Exported: "m_sql", ParamHeaders: true, Raw: json.RawMessage(`{"name":"m_sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}}`)}
	call := func(params string, headers map[string]string) *downstream.Request {
		return &downstream.Request{Msg: &jsonrpc.Message{Method: "tools/call", Params: json.RawMessage(params)},
			ParamHeader: func(name string) (string, bool) { v, ok := headers[name]; return v, ok }}
	}
	const body = `{"name":"m_sql","arguments":{"region":"us","n":42}}`
	for name, tc := range map[string]struct {
		req  *downstream.Request
		fail bool
	}{
		"agree":            {call(body, map[string]string{"Mcp-Param-Region": "us", "Mcp-Param-N": "42.0"}), false},
		"base64":           {call(body, map[string]string{"Mcp-Param-Region": "=?base64?dXM=?=", "Mcp-Param-N": "42"}), false},
		"disagree":         {call(body, map[string]string{"Mcp-Param-Region": "eu", "Mcp-Param-N": "42"}), true},
		"missing":          {call(body, map[string]string{"Mcp-Param-N": "42"}), true},
		"for no argument":  {call(`{"name":"m_sql","arguments":{"n":42}}`, map[string]string{"Mcp-Param-Region": "us", "Mcp-Param-N": "42"}), true},
		"another tool":     {call(`{"name":"mcp_call_tool","arguments":{"name":"m_sql"}}`, nil), false},
		"no header lookup": {&downstream.Request{Msg: &jsonrpc.Message{Method: "tools/call", Params: json.RawMessage(body)}}, false},
	} {
		got := paramHeaderMismatch(tc.req, entry)
		if !tc.fail {
			assert.Nil(t, got, name)
			continue
		}
		if assert.NotNil(t, got, name) {
			assert.Equal(t, -32020, got.Code, name)
		}
	}
}
