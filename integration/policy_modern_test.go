package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// askQuickConfig is policyConfig with one more rule, ask-quick, which asks
// before echo runs with the text "quick" and waits 300ms for the answer.
func askQuickConfig(auditPath string) string {
	return strings.Replace(policyConfig(auditPath), "servers:\n",
		"  - {name: ask-quick, when: 'original == \"echo\" && has(args.text) && args.text == \"quick\"', action: ask, timeout: 300ms}\nservers:\n", 1)
}

// completeResult is the result of resp, a 2026-07-28 response, which must be
// complete.
func completeResult(t *testing.T, resp map[string]any) json.RawMessage {
	t.Helper()
	result, ok := resp["result"].(map[string]any)
	require.True(t, ok, "%v", resp)
	assert.Equal(t, "complete", result["resultType"], "%v", resp)
	return mustJSON(t, result)
}

// TestPolicyAsksModernClient: a sessionless 2026-07-28 request that an ask
// rule stops is answered input_required, its inputRequests the question
// (naming the tool and the principal, a secret argument redacted) and its
// requestState the aggregator's. The retry that accepts runs the call, once:
// the same approval replayed, or presented for other arguments or by another
// conversation, is refused and runs nothing. A decline is the denial naming
// the rule; no retry within the rule's timeout is a timeout, which the late
// retry is told. The audit log has one line per decided call.
func TestPolicyAsksModernClient(t *testing.T) {
	t.Parallel()
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	a := serveConfig(t, httpTransport, askQuickConfig(auditPath))
	a.waitLoaded()
	call := func(lease string, args map[string]any, extra map[string]any) map[string]any {
		p := map[string]any{"name": "demo_echo", "arguments": args}
		for k, v := range extra {
			p[k] = v
		}
		return bridgePost(t, a.url, "tools/call", "demo_echo", lease, p)
	}
	accept := func(key string) map[string]any { return map[string]any{key: map[string]any{"action": "accept"}} }

	// Asked: the question is the rule's, as a session's client gets it.
	args := map[string]any{"text": "ask me", "api_key": "sk-very-secret-value"}
	first := call("conv-1", args, nil)
	state, key := inputState(t, first)
	question := first["result"].(map[string]any)["inputRequests"].(map[string]any)[key].(map[string]any)
	assert.Equal(t, "elicitation/create", question["method"])
	params := question["params"].(map[string]any)
	message, _ := params["message"].(string)
	assert.Contains(t, message, "Allow demo_echo for local?")
	assert.Contains(t, message, `"api_key": "[redacted]"`)
	assert.NotContains(t, string(mustJSON(t, first)), "sk-very-secret-value")
	assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{}}, params["requestedSchema"])

	// The approval does not carry over to other arguments, or to another
	// conversation's call of the same arguments.
	other := map[string]any{"text": "ask you", "api_key": "sk-very-secret-value"}
	assert.Contains(t, refusedBecause(t, call("conv-1", other, map[string]any{"requestState": state, "inputResponses": accept(key)})), "another request")
	assert.Contains(t, refusedBecause(t, call("conv-2", args, map[string]any{"requestState": state, "inputResponses": accept(key)})), "another caller")

	// Accepted: the call goes ahead.
	text, isErr := policyText(t, completeResult(t, call("conv-1", args, map[string]any{"requestState": state, "inputResponses": accept(key)})))
	assert.False(t, isErr, text)
	assert.Equal(t, "ask me", text)

	// Replayed: refused, and nothing runs.
	assert.Contains(t, refusedBecause(t, call("conv-1", args, map[string]any{"requestState": state, "inputResponses": accept(key)})), "no longer held")

	// Declined: the denial names the rule.
	state, key = inputState(t, call("conv-1", map[string]any{"text": "ask again"}, nil))
	text, isErr = policyText(t, completeResult(t, call("conv-1", map[string]any{"text": "ask again"},
		map[string]any{"requestState": state, "inputResponses": map[string]any{key: map[string]any{"action": "decline"}}})))
	assert.True(t, isErr)
	assert.Contains(t, text, `policy rule "ask-first"`)
	assert.Contains(t, text, "declined")

	// No answer within the rule's timeout: a timeout; the late retry is
	// told so, and its accept runs nothing.
	state, key = inputState(t, call("conv-1", map[string]any{"text": "quick"}, nil))
	lines := auditLines(t, auditPath, 3)
	assert.Equal(t, "timeout", lines[2]["outcome"], "%v", lines[2])
	assert.Equal(t, "ask-quick", lines[2]["rule"])
	text, isErr = policyText(t, completeResult(t, call("conv-1", map[string]any{"text": "quick"},
		map[string]any{"requestState": state, "inputResponses": accept(key)})))
	assert.True(t, isErr)
	assert.Contains(t, text, `policy rule "ask-quick": no answer came within 300ms`)
	assert.Contains(t, refusedBecause(t, call("conv-1", map[string]any{"text": "quick"},
		map[string]any{"requestState": state, "inputResponses": accept(key)})), "no longer held")

	// One line per decided call, none for the refused retries.
	lines = auditLines(t, auditPath, 3)
	require.Len(t, lines, 3, "%v", lines)
	for i, want := range []struct{ outcome, rule string }{{"approved", "ask-first"}, {"declined", "ask-first"}, {"timeout", "ask-quick"}} {
		assert.Equal(t, want.outcome, lines[i]["outcome"], "line %d: %v", i, lines[i])
		assert.Equal(t, want.rule, lines[i]["rule"], "line %d", i)
		assert.Equal(t, "demo_echo", lines[i]["tool"])
		assert.Equal(t, map[string]any{"kind": "local"}, lines[i]["principal"])
	}
	assert.Equal(t, map[string]any{"text": "ask me", "api_key": "[redacted]"}, lines[0]["args"])
	assert.NotContains(t, a.log.String(), "sk-very-secret-value")
}

// TestPolicyAsksSDK2Client: the TypeScript SDK v2 client, pinned to
// 2026-07-28, answers the question of an ask rule with its elicitation
// handler, and the SDK's own retry runs the call it accepted and gets the
// denial of the one it declined.
func TestPolicyAsksSDK2Client(t *testing.T) {
	t.Parallel()
	nodeEntry(t, sdk2Entry)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	a := serveConfig(t, httpTransport, policyConfig(auditPath))
	a.waitLoaded()
	out := runInputClient(t, "2", a.url, map[string]any{
		"capabilities": []string{"elicitation"},
		"answers":      map[string]any{"elicitation": []any{map[string]any{"action": "accept"}, map[string]any{"action": "decline"}}},
		"steps": []any{
			map[string]any{"op": "callTool", "name": "demo_echo", "arguments": map[string]any{"text": "ask me", "api_key": "sk-very-secret-value"}},
			map[string]any{"op": "callTool", "name": "demo_echo", "arguments": map[string]any{"text": "ask again"}},
		},
	})
	require.Len(t, out.Results, 2)
	require.Nil(t, out.Results[0].Error, "%+v", out.Results[0].Error)
	text, isErr := policyText(t, out.Results[0].Result)
	assert.False(t, isErr, text)
	assert.Equal(t, "ask me", text)
	require.Nil(t, out.Results[1].Error, "%+v", out.Results[1].Error)
	text, isErr = policyText(t, out.Results[1].Result)
	assert.True(t, isErr)
	assert.Contains(t, text, `policy rule "ask-first"`)
	assert.Contains(t, text, "declined")

	require.Len(t, out.Asked, 2, "each call was asked about once")
	var q struct {
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(out.Asked[0].Params, &q))
	assert.Contains(t, q.Message, "Allow demo_echo for local?")
	assert.Contains(t, q.Message, `"api_key": "[redacted]"`)
	assert.NotContains(t, q.Message, "sk-very-secret-value")
	lines := auditLines(t, auditPath, 2)
	assert.Equal(t, "approved", lines[0]["outcome"])
	assert.Equal(t, "declined", lines[1]["outcome"])
}

// TestPolicyAsksModernClientOverStdio: over stdio too, a 2026-07-28 request
// that an ask rule stops is answered input_required, the rule's question
// among its inputRequests; the retry that accepts runs the call, once, and
// the retry that declines is the denial naming the rule. So it goes without
// a conversation, through mcp_call_tool, and for two questions asked at
// once on the one connection and answered in the other order; no retry
// within the rule's timeout is a timeout, which the late retry is told.
func TestPolicyAsksModernClientOverStdio(t *testing.T) {
	t.Parallel()
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	a := serveConfig(t, stdioTransport, askQuickConfig(auditPath))
	a.waitLoaded()
	lines := bufio.NewReader(a.stdout)
	id := 0
	pending := map[string]map[string]any{} // answers read while waiting for another
	send := func(tool, lease string, args map[string]any, extra map[string]any) string {
		t.Helper()
		id++
		params := map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    modernVersion,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "stdio-test", "version": "1.0.0"},
		}}
		if lease != "" {
			params["_meta"].(map[string]any)["mcp-aggregator/lease"] = lease
		}
		for k, v := range extra {
			params[k] = v
		}
		_, err := a.stdin.Write(append(mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}), '\n'))
		require.NoError(t, err)
		return fmt.Sprint(id)
	}
	answerTo := func(id string) map[string]any {
		t.Helper()
		for pending[id] == nil {
			line, err := lines.ReadBytes('\n')
			require.NoError(t, err, "stderr:\n%s", a.log)
			msg := decodeObject(t, line)
			if got, ok := msg["id"].(json.Number); ok {
				pending[string(got)] = msg
			}
			// A notification (a list change): not an answer.
		}
		msg := pending[id]
		delete(pending, id)
		return msg
	}
	callTool := func(tool, lease string, args map[string]any, extra map[string]any) map[string]any {
		t.Helper()
		return answerTo(send(tool, lease, args, extra))
	}
	call := func(lease string, args map[string]any, extra map[string]any) map[string]any {
		t.Helper()
		return callTool("demo_echo", lease, args, extra)
	}
	answer := func(key, action string) map[string]any {
		return map[string]any{key: map[string]any{"action": action}}
	}

	args := map[string]any{"text": "ask me"}
	first := call("conv-1", args, nil)
	state, key := inputState(t, first)
	question := first["result"].(map[string]any)["inputRequests"].(map[string]any)[key].(map[string]any)
	assert.Equal(t, "elicitation/create", question["method"])
	message, _ := question["params"].(map[string]any)["message"].(string)
	assert.Contains(t, message, "Allow demo_echo for local?")

	// Accepted: the call goes ahead, once.
	text, isErr := policyText(t, completeResult(t, call("conv-1", args, map[string]any{"requestState": state, "inputResponses": answer(key, "accept")})))
	assert.False(t, isErr, text)
	assert.Equal(t, "ask me", text)
	assert.Contains(t, refusedBecause(t, call("conv-1", args, map[string]any{"requestState": state, "inputResponses": answer(key, "accept")})), "no longer held")

	// Declined: the denial names the rule.
	args = map[string]any{"text": "ask again"}
	state, key = inputState(t, call("conv-1", args, nil))
	text, isErr = policyText(t, completeResult(t, call("conv-1", args, map[string]any{"requestState": state, "inputResponses": answer(key, "decline")})))
	assert.True(t, isErr)
	assert.Contains(t, text, `policy rule "ask-first"`)
	assert.Contains(t, text, "declined")

	// Without a conversation (the anonymous lease) alike.
	args = map[string]any{"text": "ask anonymously"}
	state, key = inputState(t, call("", args, nil))
	text, isErr = policyText(t, completeResult(t, call("", args, map[string]any{"requestState": state, "inputResponses": answer(key, "accept")})))
	assert.False(t, isErr, text)
	assert.Equal(t, "ask anonymously", text)

	// Through mcp_call_tool (discovery in search mode) alike.
	viaArgs := map[string]any{"name": "demo_echo", "arguments": map[string]any{"text": "ask through search"}}
	state, key = inputState(t, callTool("mcp_call_tool", "conv-1", viaArgs, nil))
	text, isErr = policyText(t, completeResult(t, callTool("mcp_call_tool", "conv-1", viaArgs, map[string]any{"requestState": state, "inputResponses": answer(key, "accept")})))
	assert.False(t, isErr, text)
	assert.Equal(t, "ask through search", text)

	// Two questions at once on the one connection, answered in the other
	// order.
	one, two := map[string]any{"text": "ask one"}, map[string]any{"text": "ask two"}
	id1, id2 := send("demo_echo", "conv-1", one, nil), send("demo_echo", "conv-2", two, nil)
	state1, key1 := inputState(t, answerTo(id1))
	state2, key2 := inputState(t, answerTo(id2))
	id2 = send("demo_echo", "conv-2", two, map[string]any{"requestState": state2, "inputResponses": answer(key2, "decline")})
	id1 = send("demo_echo", "conv-1", one, map[string]any{"requestState": state1, "inputResponses": answer(key1, "accept")})
	text, isErr = policyText(t, completeResult(t, answerTo(id1)))
	assert.False(t, isErr, text)
	assert.Equal(t, "ask one", text)
	text, isErr = policyText(t, completeResult(t, answerTo(id2)))
	assert.True(t, isErr)
	assert.Contains(t, text, "declined")

	// No answer within the rule's timeout: the late retry is told so.
	args = map[string]any{"text": "quick"}
	state, key = inputState(t, call("conv-1", args, nil))
	audit := auditLines(t, auditPath, 7)
	assert.Equal(t, "timeout", audit[6]["outcome"], "%v", audit[6])
	text, isErr = policyText(t, completeResult(t, call("conv-1", args, map[string]any{"requestState": state, "inputResponses": answer(key, "accept")})))
	assert.True(t, isErr)
	assert.Contains(t, text, `policy rule "ask-quick": no answer came within 300ms`)

	audit = auditLines(t, auditPath, 7)
	require.Len(t, audit, 7, "%v", audit)
	outcomes := make([]string, len(audit))
	for i, line := range audit {
		outcomes[i], _ = line["outcome"].(string)
	}
	// The two asked at once are decided in either order.
	assert.ElementsMatch(t, []string{"approved", "declined"}, outcomes[4:6], "%v", outcomes)
	outcomes[4], outcomes[5] = "", ""
	assert.Equal(t, []string{"approved", "declined", "approved", "approved", "", "", "timeout"}, outcomes)
	for i := range audit {
		assert.Equal(t, map[string]any{"kind": "local"}, audit[i]["principal"])
	}
}
