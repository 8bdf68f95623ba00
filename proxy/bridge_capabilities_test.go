package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// TestBridgeRetryCapabilitiesGateLaterRounds: capabilities are per request
// in protocol 2026-07-28, so an upstream request of a later round is put to
// the client only when the retry waiting for it declares the capability;
// otherwise the upstream's request is refused and no input_required asks
// for it.
func TestBridgeRetryCapabilitiesGateLaterRounds(t *testing.T) {
	p := &Proxy{}
	require.NoError(t, p.bridge.Init(p.bridgeConfig()))
	request := func(params, caps string) *downstream.Request {
		return &downstream.Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(params)},
			Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(caps), Send: func(*jsonrpc.Message) bool { return true }}
	}
	serve := func(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
		if _, err := req.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"one"}`)); err != nil {
			return failure(codeInternal, "%v", err)
		}
		second, err := req.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"two"}`))
		if err != nil {
			return failure(codeInternal, "%v", err)
		}
		if second.Error != nil {
			return &jsonrpc.Message{Result: json.RawMessage(fmt.Sprintf(`{"refused":%q}`, second.Error.Message))}
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{"asked":true}`)}
	}
	ctx := context.Background()
	params := `{"name":"t","arguments":{}`
	resp := p.bridged(ctx, request(params+`}`, `{"elicitation":{}}`), serve)
	state, key := roundOf(t, resp, "one")
	resp = p.bridged(ctx, request(fmt.Sprintf(`%s,"requestState":%q,"inputResponses":{%q:{"action":"accept"}}}`, params, state, key), `{}`), serve)
	require.NotNil(t, resp)
	require.Nil(t, resp.Error, "%+v", resp.Error)
	var got struct {
		ResultType string `json:"resultType"`
		Refused    string `json:"refused"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &got), "%s", resp.Result)
	assert.NotEqual(t, "input_required", got.ResultType, "%s", resp.Result)
	assert.Contains(t, got.Refused, "did not declare the elicitation capability")
}

// TestBridgeRetryLogLevelIsItsOwn: a log message of the run reaches the
// client request waiting at the time only at or above the level that
// request names in its own _meta; a retry that names none gets none, even
// when the request that started the exchange named one.
func TestBridgeRetryLogLevelIsItsOwn(t *testing.T) {
	p := &Proxy{}
	require.NoError(t, p.bridge.Init(p.bridgeConfig()))
	logged := make(chan string, 8)
	request := func(params string) *downstream.Request {
		return &downstream.Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(params)},
			Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(`{"elicitation":{}}`),
			Send: func(m *jsonrpc.Message) bool {
				if m.Method == "notifications/message" {
					logged <- string(m.Params)
				}
				return true
			}}
	}
	serve := func(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
		if _, err := req.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"one"}`)); err != nil {
			return failure(codeInternal, "%v", err)
		}
		for _, level := range []string{"debug", "error"} {
			req.Send(&jsonrpc.Message{Method: "notifications/message", Params: json.RawMessage(`{"level":"` + level + `","data":"x"}`)})
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{"done":true}`)}
	}
	ctx := context.Background()
	params := `{"name":"t","arguments":{}`
	withLevel := func(level string) string {
		if level == "" {
			return ""
		}
		return `,"_meta":{"io.modelcontextprotocol/logLevel":"` + level + `"}`
	}
	for _, tc := range []struct {
		retry string
		want  []string
	}{
		{"", nil},
		{"error", []string{`{"level":"error","data":"x"}`}},
	} {
		resp := p.bridged(ctx, request(params+withLevel("debug")+`}`), serve)
		state, key := roundOf(t, resp, "one")
		resp = p.bridged(ctx, request(fmt.Sprintf(`%s,"requestState":%q,"inputResponses":{%q:{"action":"accept"}}%s}`, params, state, key, withLevel(tc.retry))), serve)
		require.NotNil(t, resp)
		require.Nil(t, resp.Error, "%+v", resp.Error)
		var got []string
		for len(logged) > 0 {
			got = append(got, <-logged)
		}
		assert.Equal(t, len(tc.want), len(got), "retry level %q: %v", tc.retry, got)
		for i := range min(len(got), len(tc.want)) {
			assert.JSONEq(t, tc.want[i], got[i])
		}
	}
}
