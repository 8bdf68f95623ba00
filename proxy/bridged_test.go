package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// TestBridgeRoundsWithoutClient drives one exchange as a 2026-07-28 client
// would, with the upstream played by the served function: two rounds, the
// answers reaching it, then its result; a replayed state is refused.
func TestBridgeRoundsWithoutClient(t *testing.T) {
	p := &Proxy{}
	require.NoError(t, p.bridge.Init(p.bridgeConfig()))
	caps := json.RawMessage(`{"elicitation":{}}`)
	request := func(params string) *downstream.Request {
		return &downstream.Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(params)},
			Protocol: "2026-07-28", ClientCapabilities: caps, Send: func(*jsonrpc.Message) bool { return true }}
	}
	serve := func(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
		first, err := req.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"one"}`))
		if err != nil {
			return failure(codeInternal, "%v", err)
		}
		second, err := req.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"two"}`))
		if err != nil {
			return failure(codeInternal, "%v", err)
		}
		return &jsonrpc.Message{Result: json.RawMessage(fmt.Sprintf(`{"got":[%s,%s]}`, first.Result, second.Result))}
	}
	ctx := context.Background()
	params := `{"name":"t","arguments":{}`
	resp := p.bridged(ctx, request(params+`}`), serve)
	state, key := roundOf(t, resp, "one")
	resp = p.bridged(ctx, request(fmt.Sprintf(`%s,"requestState":%q,"inputResponses":{%q:{"n":1}}}`, params, state, key)), serve)
	state2, key2 := roundOf(t, resp, "two")
	resp = p.bridged(ctx, request(fmt.Sprintf(`%s,"requestState":%q,"inputResponses":{%q:{"n":2}}}`, params, state2, key2)), serve)
	require.Nil(t, resp.Error)
	assert.JSONEq(t, `{"got":[{"n":1},{"n":2}]}`, string(resp.Result))

	resp = p.bridged(ctx, request(fmt.Sprintf(`%s,"requestState":%q,"inputResponses":{}}`, params, state2)), serve)
	require.NotNil(t, resp.Error)
	assert.Contains(t, resp.Error.Message, "requestState refused")
	assert.Zero(t, p.bridge.Held(), "nothing is left held")
}

// roundOf reads an input_required response with one request.
func roundOf(t *testing.T, resp *jsonrpc.Message, message string) (state, key string) {
	t.Helper()
	require.NotNil(t, resp)
	require.Nil(t, resp.Error, "%+v", resp.Error)
	var r struct {
		ResultType string `json:"resultType"`
		Requests   map[string]struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		} `json:"inputRequests"`
		State string `json:"requestState"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &r))
	require.Equal(t, "input_required", r.ResultType)
	require.Len(t, r.Requests, 1)
	for k, v := range r.Requests {
		assert.Equal(t, message, v.Params.Message)
		key = k
	}
	return r.State, key
}

// TestBridgeProgressAndCancel: progress of a held request reaches the client
// request waiting at the time, under that request's token; when that request
// is cancelled, the held run ends too.
func TestBridgeProgressAndCancel(t *testing.T) {
	p := &Proxy{}
	require.NoError(t, p.bridge.Init(p.bridgeConfig()))
	type sent struct {
		to  string
		msg *jsonrpc.Message
	}
	got := make(chan sent, 8)
	request := func(name, params string) *downstream.Request {
		return &downstream.Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(params)},
			Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(`{"elicitation":{}}`),
			Send: func(m *jsonrpc.Message) bool { got <- sent{name, m}; return true }}
	}
	ended := make(chan struct{})
	serve := func(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
		progress := func(n int) {
			req.Send(&jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(fmt.Sprintf(`{"progressToken":"first","progress":%d}`, n))})
		}
		progress(1)
		if _, err := req.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"one"}`)); err != nil {
			return failure(codeInternal, "%v", err)
		}
		progress(2)
		<-ctx.Done()
		close(ended)
		return nil
	}
	resp := p.bridged(context.Background(), request("first", `{"name":"t","_meta":{"progressToken":"first"}}`), serve)
	first := <-got
	assert.Equal(t, "first", first.to)
	assert.JSONEq(t, `{"progressToken":"first","progress":1}`, string(first.msg.Params))
	state, key := roundOf(t, resp, "one")

	ctx, cancel := context.WithCancel(context.Background())
	retried := make(chan *jsonrpc.Message, 1)
	go func() {
		retried <- p.bridged(ctx, request("retry", fmt.Sprintf(`{"name":"t","_meta":{"progressToken":7},"requestState":%q,"inputResponses":{%q:{}}}`, state, key)), serve)
	}()
	second := <-got
	assert.Equal(t, "retry", second.to)
	assert.JSONEq(t, `{"progressToken":7,"progress":2}`, string(second.msg.Params), "under the retry's own token")
	cancel()
	<-ended // the held run was cancelled with the request waiting on it
	assert.Nil(t, <-retried, "no response is due to a cancelled request")
}

// TestBridgeHoldExpiryEndsTheRun: a held request whose client never
// retries is cancelled once the hold runs out, upstream request and all,
// so that it stops counting as in flight on its instance (a shared
// instance's unlinked requests look for the calls in flight).
func TestBridgeHoldExpiryEndsTheRun(t *testing.T) {
	p := &Proxy{}
	cfg := p.bridgeConfig()
	cfg.Hold = 50 * time.Millisecond
	require.NoError(t, p.bridge.Init(cfg))
	ended := make(chan struct{})
	serve := func(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
		_, err := req.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"one"}`))
		assert.Error(t, err, "the ask ends with the run")
		close(ended)
		return nil
	}
	req := &downstream.Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(`{"name":"t"}`)},
		Protocol: "2026-07-28", ClientCapabilities: json.RawMessage(`{"elicitation":{}}`), Send: func(*jsonrpc.Message) bool { return true }}
	roundOf(t, p.bridged(context.Background(), req, serve), "one")
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the held run outlived its hold")
	}
	assert.Zero(t, p.bridge.Held(), "nothing is left held")
}
