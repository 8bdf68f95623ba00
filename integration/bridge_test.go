package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bridge between the protocol generations, end to end: real SDK servers of
// one generation behind the aggregator, real SDK clients of the other in front.

// inputClientOutput is what node/inputclient.mjs writes.
type inputClientOutput struct {
	Results []struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
	Asked []struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"asked"`
	Wire []struct {
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	} `json:"wire"`
	Fatal string `json:"fatal"`
}

// runInputClient runs node/inputclient.mjs (the SDK client of generation sdk, "1"
// or "2") against url with input, and returns its output.
func runInputClient(t *testing.T, sdk, url string, input map[string]any) inputClientOutput {
	t.Helper()
	return runInputClientAs(t, sdk, url, "", input)
}

// runInputClientAs is runInputClient as the client holding token ("": none).
func runInputClientAs(t *testing.T, sdk, url, token string, input map[string]any) inputClientOutput {
	t.Helper()
	if sdk == "2" {
		nodeEntry(t, sdk2Entry)
	} else {
		nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	defer cancel()
	args := []string{filepath.Join(nodeDir, "inputclient.mjs"), "--sdk", sdk, "--http", url}
	if token != "" {
		args = append(args, "--token", token)
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = bytes.NewReader(mustJSON(t, input))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var out inputClientOutput
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "inputclient stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.Empty(t, out.Fatal, "inputclient stderr:\n%s", stderr.String())
	require.NoError(t, err, "inputclient stderr:\n%s", stderr.String())
	return out
}

// resultText is the text of a result's first content item, or of a prompt's first message.
func resultText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Messages []struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
	switch {
	case len(r.Content) > 0:
		return r.Content[0].Text
	case len(r.Messages) > 0:
		return r.Messages[0].Content.Text
	case len(r.Contents) > 0:
		return r.Contents[0].Text
	}
	return ""
}

// askServerConfig puts node/askserver.mjs (SDK 1.x, protocol 2025-11-25) behind
// the aggregator.
func askServerConfig(t *testing.T, extra string) string {
	t.Helper()
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	return fmt.Sprintf(`version: 1
servers:
  ask:
    command: node
    args: [%q]
%s`, filepath.Join(nodeDir, "askserver.mjs"), extra)
}

// elicitAccept is an accepted elicitation with content.
func elicitAccept(content map[string]any) map[string]any {
	return map[string]any{"action": "accept", "content": content}
}

// sampled is a sampling result with text.
func sampled(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": text}, "model": "bridge-test-model", "stopReason": "endTurn"}
}

// TestBridgeModernClientOldUpstream: the TypeScript SDK v2 client, pinned to
// 2026-07-28, calls tools, a prompt and a resource of a TypeScript SDK 1.x server
// that asks for input with server requests. The aggregator answers the client
// input_required with the upstream's requests and a requestState of its own, and
// the client's retries carry the answers back: several rounds, several kinds,
// several at once.
func TestBridgeModernClientOldUpstream(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, askServerConfig(t, ""))
	a.waitLoaded()
	out := runInputClient(t, "2", a.url, map[string]any{
		"capabilities": []string{"elicitation", "sampling", "roots"},
		"answers": map[string]any{
			"elicitation": []any{
				elicitAccept(map[string]any{"name": "Ada"}),
				elicitAccept(map[string]any{"name": "Grace"}),
				elicitAccept(map[string]any{"color": "teal"}),
				elicitAccept(map[string]any{"name": "Edsger"}),
				elicitAccept(map[string]any{"name": "Barbara"}),
				elicitAccept(map[string]any{"name": "Donald"}),
			},
			"sampling": []any{sampled("a fine reply"), sampled("roses are teal"), sampled("both at once")},
			"roots":    map[string]any{"roots": []any{map[string]any{"uri": "file:///work/a", "name": "a"}, map[string]any{"uri": "file:///work/b"}}},
		},
		"steps": []any{
			map[string]any{"op": "callTool", "name": "elicit_name"},
			map[string]any{"op": "callTool", "name": "sample", "arguments": map[string]any{"prompt": "say hi"}},
			map[string]any{"op": "callTool", "name": "interview"},
			map[string]any{"op": "callTool", "name": "list_roots"},
			map[string]any{"op": "callTool", "name": "both"},
			map[string]any{"op": "getPrompt", "name": "greeting"},
			map[string]any{"op": "readResource", "uri": "ask://whoami"},
		},
	})
	require.Len(t, out.Results, 7)
	for i, r := range out.Results {
		require.Nil(t, r.Error, "step %d failed: %+v", i, r.Error)
	}
	assert.Equal(t, "hello Ada", resultText(t, out.Results[0].Result))
	assert.Equal(t, "model said: a fine reply", resultText(t, out.Results[1].Result))
	assert.Equal(t, "Grace likes teal: roses are teal", resultText(t, out.Results[2].Result))
	assert.Equal(t, "file:///work/a,file:///work/b", resultText(t, out.Results[3].Result))
	assert.Equal(t, "Edsger / both at once", resultText(t, out.Results[4].Result))
	assert.Equal(t, "Greet Barbara", resultText(t, out.Results[5].Result))
	assert.Equal(t, "you are Donald", resultText(t, out.Results[6].Result))
	assertJSONEqual(t, []byte(`{"name":"Grace","color":"teal","said":"roses are teal"}`), structuredOf(t, out.Results[2].Result))

	// What the client was asked is what the upstream asked, params byte for byte
	// as JSON (the SDK may add nothing but what it validates).
	var methods []string
	for _, a := range out.Asked {
		methods = append(methods, a.Method)
	}
	assert.Equal(t, []string{"elicitation/create", "sampling/createMessage", "elicitation/create", "elicitation/create",
		"sampling/createMessage", "roots/list"}, methods[:6])
	assert.ElementsMatch(t, []string{"elicitation/create", "sampling/createMessage"}, methods[6:8], "both: asked together")
	assert.Equal(t, []string{"elicitation/create", "elicitation/create"}, methods[8:])
	assert.Equal(t, "Round 2: Grace, your favourite color?", decodeObject(t, out.Asked[3].Params)["message"])

	// On the wire: each tools/call answered input_required once per round, with
	// the aggregator's requestState, then complete.
	rounds := map[string]int{}
	var calls []string
	for _, w := range out.Wire {
		require.Empty(t, w.Error, "%s: %s", w.Method, w.Error)
		r := decodeObject(t, w.Result)
		calls = append(calls, fmt.Sprint(w.Method, ":", r["resultType"]))
		if r["resultType"] == "input_required" {
			rounds[w.Method]++
			state, _ := r["requestState"].(string)
			assert.True(t, strings.HasPrefix(state, "mcpagg1."), "requestState %q", state)
			assert.NotEmpty(t, r["inputRequests"])
		}
	}
	// both's two requests reach the client in one round when the second arrives
	// before the first is handed out, else in two.
	assert.Contains(t, []int{7, 8}, rounds["tools/call"], "1 + 1 + 3 + 1 + (1 or 2) rounds: %v", calls)
	assert.Equal(t, 1, rounds["prompts/get"], "%v", calls)
	assert.Equal(t, 1, rounds["resources/read"], "%v", calls)
}

// structuredOf is a tool result's structuredContent, raw.
func structuredOf(t *testing.T, result json.RawMessage) []byte {
	t.Helper()
	var r struct {
		Structured json.RawMessage `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(result, &r))
	return r.Structured
}

// TestBridgeModernClientMissingCapability: a 2026-07-28 client that declared
// neither elicitation nor sampling is never asked for them; the upstream's
// request fails with an error naming the capability, which its tool reports.
func TestBridgeModernClientMissingCapability(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, askServerConfig(t, ""))
	a.waitLoaded()
	out := runInputClient(t, "2", a.url, map[string]any{
		"capabilities": []string{"roots"},
		"answers":      map[string]any{"roots": map[string]any{"roots": []any{}}},
		"steps":        []any{map[string]any{"op": "callTool", "name": "elicit_name"}, map[string]any{"op": "callTool", "name": "sample", "arguments": map[string]any{"prompt": "x"}}},
	})
	require.Len(t, out.Results, 2)
	assert.Empty(t, out.Asked, "nothing undeclared reaches the client")
	for i, capability := range []string{"elicitation", "sampling"} {
		r := out.Results[i]
		require.Nil(t, r.Error, "the tool reports the failure itself: %+v", r.Error)
		var res struct {
			IsError bool `json:"isError"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &res))
		assert.True(t, res.IsError, "%s", r.Result)
		assert.Contains(t, resultText(t, r.Result), "did not declare the "+capability+" capability")
	}
}

// startInputServer runs node/inputserver.mjs (SDK v2, protocol 2026-07-28 only)
// and returns its URL.
func startInputServer(t *testing.T) (url string, log *logBuffer) {
	t.Helper()
	return startModernNodeServer(t, "inputserver")
}

// startModernNodeServer runs node/<name>.mjs, a server on the TypeScript SDK
// v2 that listens on a port of its choosing and says so ("<name>: listening
// <url>"), until the test ends; it returns that URL and the server's output.
func startModernNodeServer(t *testing.T, name string) (url string, log *logBuffer) {
	t.Helper()
	nodeEntry(t, "@modelcontextprotocol/server/package.json")
	cmd := exec.Command("node", filepath.Join(nodeDir, name+".mjs"))
	_, err := cmd.StdinPipe() // the server ends when it closes, as it does once the server has exited
	require.NoError(t, err)
	log, exited := startProcessGroup(t, cmd)
	listening := name + ": listening "
	line, ok := log.waitLine(func(line string) bool { return strings.HasPrefix(line, listening) }, startTimeout, exited)
	require.True(t, ok, "%s never said where it listens:\n%s", name, log)
	return strings.TrimPrefix(line, listening), log
}

// TestBridgeOldClientModernUpstream: a 2026-07-28 upstream (TypeScript SDK v2
// server, serving that generation only) answers input_required; the aggregator
// asks a TypeScript SDK 1.x client (2025-11-25) with elicitation/create,
// sampling/createMessage and roots/list on the call's stream, and retries
// upstream with the answers until the final result.
func TestBridgeOldClientModernUpstream(t *testing.T) {
	t.Parallel()
	a, serverLog := modernUpstream(t, "    truely-stateless: true\n")
	out := runInputClient(t, "1", a.url, map[string]any{
		"capabilities": []string{"elicitation", "sampling", "roots"},
		"answers": map[string]any{
			"elicitation": []any{elicitAccept(map[string]any{"name": "Ada"}), elicitAccept(map[string]any{"name": "Grace"}), elicitAccept(map[string]any{"name": "Barbara"})},
			"sampling":    []any{sampled("a fine reply"), sampled("an ode")},
			"roots":       map[string]any{"roots": []any{map[string]any{"uri": "file:///r/one"}, map[string]any{"uri": "file:///r/two"}}},
		},
		"steps": []any{
			map[string]any{"op": "callTool", "name": "confirm_name"},
			map[string]any{"op": "callTool", "name": "sample", "arguments": map[string]any{"prompt": "say hi"}},
			map[string]any{"op": "callTool", "name": "interview"},
			map[string]any{"op": "callTool", "name": "list_roots"},
			map[string]any{"op": "getPrompt", "name": "greeting"},
		},
	})
	require.Len(t, out.Results, 5, "server log:\n%s\naggregator log:\n%s", serverLog, a.log)
	for i, r := range out.Results {
		require.Nil(t, r.Error, "step %d failed: %+v\nserver log:\n%s", i, r.Error, serverLog)
	}
	assert.Equal(t, "hello Ada", resultText(t, out.Results[0].Result))
	assert.Equal(t, "model said: a fine reply", resultText(t, out.Results[1].Result))
	assert.Equal(t, "Grace: an ode", resultText(t, out.Results[2].Result))
	assert.Equal(t, "file:///r/one,file:///r/two", resultText(t, out.Results[3].Result))
	assert.Equal(t, "Greet Barbara", resultText(t, out.Results[4].Result))
	var methods []string
	for _, a := range out.Asked {
		methods = append(methods, a.Method)
	}
	assert.Equal(t, []string{"elicitation/create", "sampling/createMessage", "elicitation/create", "sampling/createMessage", "roots/list", "elicitation/create"}, methods)
	assert.Equal(t, "Round 2: a poem about Grace", decodeObject(t, out.Asked[3].Params)["messages"].([]any)[0].(map[string]any)["content"].(map[string]any)["text"])
	for _, w := range out.Wire {
		if r := decodeObject(t, w.Result); r != nil {
			assert.NotEqual(t, "input_required", r["resultType"], "a 2025-11-25 client never sees input_required")
		}
	}

	// A 2026-07-28 client of the same upstream: the aggregator answers the
	// upstream's rounds through its own input_required rounds; the upstream's
	// requestState stays in the aggregator.
	modern := runInputClient(t, "2", a.url, map[string]any{
		"capabilities": []string{"elicitation", "sampling"},
		"answers": map[string]any{
			"elicitation": []any{elicitAccept(map[string]any{"name": "Hedy"})},
			"sampling":    []any{sampled("a sonnet")},
		},
		"steps": []any{map[string]any{"op": "callTool", "name": "interview"}},
	})
	require.Len(t, modern.Results, 1)
	require.Nil(t, modern.Results[0].Error, "%+v", modern.Results[0].Error)
	assert.Equal(t, "Hedy: a sonnet", resultText(t, modern.Results[0].Result))
	states := 0
	for _, w := range modern.Wire {
		if r := decodeObject(t, w.Result); r["resultType"] == "input_required" {
			states++
			assert.True(t, strings.HasPrefix(r["requestState"].(string), "mcpagg1."), "%v", r)
		}
	}
	assert.Equal(t, 2, states, "two rounds")

	// A client that did not declare sampling is not asked; the call fails with
	// an error naming the capability.
	out = runInputClient(t, "1", a.url, map[string]any{
		"capabilities": []string{"elicitation"},
		"answers":      map[string]any{"elicitation": []any{elicitAccept(map[string]any{"name": "x"})}},
		"steps":        []any{map[string]any{"op": "callTool", "name": "sample", "arguments": map[string]any{"prompt": "x"}}},
	})
	require.Len(t, out.Results, 1)
	assert.Empty(t, out.Asked)
	require.NotNil(t, out.Results[0].Error, "%s", out.Results[0].Result)
	assert.Contains(t, out.Results[0].Error.Message, "did not declare the sampling capability")
}

// bridgePost sends one sessionless request with the given client capabilities
// and lease key, and returns the JSON-RPC response.
func bridgePost(t *testing.T, url, method, name, lease string, params map[string]any) map[string]any {
	t.Helper()
	return bridgePostAs(t, url, "", map[string]any{"elicitation": map[string]any{}}, method, name, lease, params)
}

// bridgePostAs is bridgePost as the client holding token ("": none),
// declaring caps.
func bridgePostAs(t *testing.T, url, token string, caps map[string]any, method, name, lease string, params map[string]any) map[string]any {
	t.Helper()
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "bridge-test", "version": "1.0.0"},
	}
	if lease != "" {
		meta["mcp-aggregator/lease"] = lease
	}
	params["_meta"] = meta
	body := mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := newModernRequest(ctx, url, token, method, name, body)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	data := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		require.NoError(t, readSSE(bytes.NewReader(raw), func(d []byte) bool {
			var m map[string]any
			if json.Unmarshal(d, &m) == nil && m["id"] != nil {
				data = d
				return true
			}
			return false
		}))
	}
	return decodeObject(t, data)
}

// inputState returns the requestState and the one input request key of an
// input_required response.
func inputState(t *testing.T, resp map[string]any) (state, key string) {
	t.Helper()
	result, ok := resp["result"].(map[string]any)
	require.True(t, ok, "%v", resp)
	require.Equal(t, "input_required", result["resultType"], "%v", resp)
	requests := result["inputRequests"].(map[string]any)
	require.Len(t, requests, 1)
	for k := range requests {
		key = k
	}
	return result["requestState"].(string), key
}

// refusedBecause asserts a refused requestState and returns the error message.
func refusedBecause(t *testing.T, resp map[string]any) string {
	t.Helper()
	e, ok := resp["error"].(map[string]any)
	require.True(t, ok, "expected an error, got %v", resp)
	assert.Equal(t, json.Number("-32602"), e["code"])
	assert.Equal(t, map[string]any{"reason": "invalid_request_state"}, e["data"])
	return e["message"].(string)
}

// TestBridgeRequestStateRefused: the requestState the aggregator issues is bound
// to the caller and the request, cannot be forged, and is good once; raw
// JSON-RPC against the real binary.
func TestBridgeRequestStateRefused(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, askServerConfig(t, ""))
	a.waitLoaded()
	call := func(lease string, extra map[string]any) map[string]any {
		p := map[string]any{"name": "elicit_name", "arguments": map[string]any{}}
		for k, v := range extra {
			p[k] = v
		}
		return bridgePost(t, a.url, "tools/call", "elicit_name", lease, p)
	}
	state, key := inputState(t, call("conv-1", nil))
	answer := map[string]any{key: elicitAccept(map[string]any{"name": "Zed"})}

	// Forged: one character of the token changed.
	i := len(state) / 2
	c := byte('A')
	if state[i] == 'A' {
		c = 'B'
	}
	forged := state[:i] + string(c) + state[i+1:]
	assert.Contains(t, refusedBecause(t, call("conv-1", map[string]any{"requestState": forged, "inputResponses": answer})), "authentication")
	// Garbage with the aggregator's prefix.
	assert.Contains(t, refusedBecause(t, call("conv-1", map[string]any{"requestState": "mcpagg1." + strings.Repeat("x", 400), "inputResponses": answer})), "malformed")
	// Another caller (lease key) presenting it.
	assert.Contains(t, refusedBecause(t, call("conv-2", map[string]any{"requestState": state, "inputResponses": answer})), "another caller")
	// Another request: other arguments.
	other := bridgePost(t, a.url, "tools/call", "elicit_name", "conv-1",
		map[string]any{"name": "elicit_name", "arguments": map[string]any{"x": 1}, "requestState": state, "inputResponses": answer})
	assert.Contains(t, refusedBecause(t, other), "another request")

	// The real retry completes the call.
	done := call("conv-1", map[string]any{"requestState": state, "inputResponses": answer})
	result, ok := done["result"].(map[string]any)
	require.True(t, ok, "%v", done)
	assert.Equal(t, "complete", result["resultType"])
	assert.Equal(t, "hello Zed", result["content"].([]any)[0].(map[string]any)["text"])

	// Replayed: refused.
	assert.Contains(t, refusedBecause(t, call("conv-1", map[string]any{"requestState": state, "inputResponses": answer})), "no longer held")

	// A retry that leaves an input unanswered is asked it again, with a new
	// state; the old one is then used up.
	state2, key2 := inputState(t, call("conv-1", nil))
	state3, key3 := inputState(t, call("conv-1", map[string]any{"requestState": state2, "inputResponses": map[string]any{}}))
	assert.Equal(t, key2, key3)
	assert.NotEqual(t, state2, state3)
	assert.Contains(t, refusedBecause(t, call("conv-1", map[string]any{"requestState": state2, "inputResponses": answer})), "already used")
	done = call("conv-1", map[string]any{"requestState": state3, "inputResponses": map[string]any{key3: elicitAccept(map[string]any{"name": "Yuki"})}})
	assert.Equal(t, "hello Yuki", done["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"], "%v", done)
}

// TestBridgeAbandonedRetryReleasesUpstream: when the retry never comes, the held
// upstream call is cancelled upstream at the call's timeout; the retry that comes
// later is told how the call ended, and the state is refused afterwards.
func TestBridgeAbandonedRetryReleasesUpstream(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, askServerConfig(t, "    request_timeout: 2s\n"))
	a.waitLoaded()
	start := time.Now()
	state, key := inputState(t, bridgePost(t, a.url, "tools/call", "elicit_name", "conv-x", map[string]any{"name": "elicit_name", "arguments": map[string]any{}}))
	// Cancelled upstream: the upstream sees its request withdrawn, or its
	// elicitation fail as the call ends, whichever reaches it first.
	_, ok := a.log.waitLine(func(line string) bool {
		return strings.Contains(line, "askserver: cancelled elicit_name") || strings.Contains(line, "askserver: elicit_name got no answer")
	}, 30*time.Second, a.exited)
	require.True(t, ok, "the upstream never saw its call cancelled; log:\n%s", a.log)
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Second, "not before the call's timeout")
	resp := bridgePost(t, a.url, "tools/call", "elicit_name", "conv-x", map[string]any{"name": "elicit_name", "arguments": map[string]any{},
		"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "late"})}})
	// The late retry is told how the call ended, once.
	e, ok := resp["error"].(map[string]any)
	require.True(t, ok, "%v", resp)
	assert.Contains(t, e["message"], "no result within 2s set by request_timeout")
	resp = bridgePost(t, a.url, "tools/call", "elicit_name", "conv-x", map[string]any{"name": "elicit_name", "arguments": map[string]any{},
		"requestState": state, "inputResponses": map[string]any{key: elicitAccept(map[string]any{"name": "late"})}})
	assert.Contains(t, refusedBecause(t, resp), "no longer held")
}
