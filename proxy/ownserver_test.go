package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

func TestOwnServerAnswersAsAnUpstreamWould(t *testing.T) {
	p := newTestProxy(t)
	require.Empty(t, reconcile(t, p, loadConfig(t, discoveryConfig("[]"))).Failed)
	own := &ownServer{p: p, st: p.current(), key: session.Key{}}

	call := func(name string, args any) (json.RawMessage, error) {
		raw, err := json.Marshal(args)
		require.NoError(t, err)
		r, err := (upstream.Call{Name: name, Arguments: raw}).Request()
		require.NoError(t, err)
		return own.Do(context.Background(), r)
	}

	status, err := call("mcp_status", map[string]any{})
	require.NoError(t, err)
	r := decodeResult(t, status)
	require.Len(t, r.Content, 1)
	var st Status
	require.NoError(t, json.Unmarshal([]byte(r.Content[0].Text), &st), "mcp_status's text is its status as JSON")
	assert.Len(t, st.Servers, 2)

	found, err := call(searchToolName, map[string]any{"query": "add two numbers", "limit": 1})
	require.NoError(t, err)
	var s searchResult
	require.NoError(t, json.Unmarshal(found, &s))
	assert.Equal(t, []string{"demo_add"}, s.names())

	// mcp_call_tool reaches the own server only when it names no tool the
	// caller can run (the forwarder runs the others as themselves).
	unknown, err := call(callToolName, map[string]any{"name": "demo_ecoh"})
	require.NoError(t, err)
	assert.True(t, decodeResult(t, unknown).IsError)
	assert.Contains(t, string(unknown), "Closest: demo_echo")

	_, err = call("demo_add", map[string]any{"a": 1, "b": 2})
	var rpcErr *jsonrpc.Error
	require.True(t, errors.As(err, &rpcErr), "a tool of another server is no tool of the own server: %v", err)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcErr.Code)

	_, err = own.Do(context.Background(), upstream.Request{Method: "resources/read", Params: json.RawMessage(`{"uri":"x:y"}`)})
	require.True(t, errors.As(err, &rpcErr), "%v", err)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcErr.Code)
}

func TestCallToolTakesTheToolsOwnLimits(t *testing.T) {
	// mcp_call_tool goes through the forwarder as the tool it names: the
	// tool's own timeout applies, and the error is the one a direct call
	// gets, byte for byte.
	p := newTestProxy(t)
	text := strings.Replace(string(discoveryConfig("[]")), "transform: [{prefix: demo_}]",
		"transform: [{prefix: demo_}]\n    tools: {config: {slow: {timeout: 300ms}}}", 1)
	require.Empty(t, reconcile(t, p, loadConfig(t, []byte(text))).Failed)
	c := connect(t, p)

	args := map[string]any{"seconds": 60, "steps": 0}
	direct := c.call("tools/call", map[string]any{"name": "demo_slow", "arguments": args})
	through := c.call("tools/call", map[string]any{"name": callToolName, "arguments": map[string]any{"name": "demo_slow", "arguments": args}})
	require.NotEmpty(t, direct.Error, "%s", direct.Line)
	require.NotEmpty(t, through.Error, "%s", through.Line)
	assert.Contains(t, string(direct.Error), "tools.config.slow.timeout")
	assert.JSONEq(t, string(direct.Error), string(through.Error))
}
