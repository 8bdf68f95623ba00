package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// policyConfig denies echoing "forbidden" and asks before echoing
// anything that starts with "ask"; the api_key argument is a secret the
// question must not show.
func policyConfig() string {
	return fmt.Sprintf(`version: 1
discovery: {mode: search}
policy:
  - name: no-forbidden
    when: 'tool == "demo_echo" && has(args.text) && args.text == "forbidden"'
    action: deny
    message: this text may not be echoed
  - name: ask-first
    when: 'original == "echo" && has(args.text) && args.text.startsWith("ask")'
    action: ask
servers:
  demo:
    truely-stateless: true
    %s
    transform: [{prefix: demo_}]
`, demoServer("tools"))
}

// policyText is the text of a tool result and whether it is an error.
func policyText(t *testing.T, raw json.RawMessage) (string, bool) {
	t.Helper()
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	require.NotEmpty(t, res.Content, "%s", raw)
	return res.Content[0].Text, res.IsError
}

// TestPolicyDeniesAndAsks: over stdio and HTTP, through tools/call and
// mcp_call_tool, a rule denies a call by an argument's value (a tool error
// naming the rule and its message), and a rule asks the client, which
// accepts (the call goes ahead) or declines (denied); the question names
// the tool and the principal, and shows the arguments with secrets
// redacted. A client that cannot elicit is denied. Other calls pass.
func TestPolicyDeniesAndAsks(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, policyConfig())
		a.waitLoaded()
		var mu sync.Mutex
		var asked []string
		answer := "accept"
		c := a.newClient()
		c.inbox.onRequest = func(method string, params json.RawMessage) (string, string) {
			if method != "elicitation/create" {
				return "", `{"code":-32601,"message":"no"}`
			}
			var p struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(params, &p)
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, p.Message)
			return `{"action":"` + answer + `"}`, ""
		}
		c.initializeWith(map[string]any{"elicitation": map[string]any{}})
		answerWith := func(a string) { mu.Lock(); answer = a; mu.Unlock() }

		direct := func(args map[string]any) json.RawMessage { return c.callToolResult("demo_echo", args) }
		viaCallTool := func(args map[string]any) json.RawMessage {
			return c.callToolResult("mcp_call_tool", map[string]any{"name": "demo_echo", "arguments": args})
		}
		for _, path := range []struct {
			name string
			call func(map[string]any) json.RawMessage
		}{{"tools/call", direct}, {"mcp_call_tool", viaCallTool}} {
			t.Run(path.name, func(t *testing.T) {
				text, isErr := policyText(t, path.call(map[string]any{"text": "forbidden"}))
				assert.True(t, isErr)
				assert.Contains(t, text, `policy rule "no-forbidden"`)
				assert.Contains(t, text, "this text may not be echoed")

				text, isErr = policyText(t, path.call(map[string]any{"text": "fine"}))
				assert.False(t, isErr, text)
				assert.Equal(t, "fine", text)

				answerWith("accept")
				text, isErr = policyText(t, path.call(map[string]any{"text": "ask me", "api_key": "sk-very-secret-value"}))
				assert.False(t, isErr, text)
				assert.Equal(t, "ask me", text, "approved: the call went ahead")

				answerWith("decline")
				text, isErr = policyText(t, path.call(map[string]any{"text": "ask again"}))
				assert.True(t, isErr)
				assert.Contains(t, text, `policy rule "ask-first"`)
				assert.Contains(t, text, "declined")
			})
		}
		mu.Lock()
		require.Len(t, asked, 4, "each ask reached the client once")
		q := asked[0]
		mu.Unlock()
		assert.Contains(t, q, "Allow demo_echo for local?")
		assert.Contains(t, q, `"text": "ask me"`)
		assert.Contains(t, q, `"api_key": "[redacted]"`)
		assert.NotContains(t, q, "sk-very-secret-value")

		if tr == httpTransport { // stdio serves one client
			// A client without the elicitation capability is denied.
			mute := a.newClient()
			mute.initialize()
			text, isErr := policyText(t, mute.callToolResult("demo_echo", map[string]any{"text": "ask anyway"}))
			assert.True(t, isErr)
			assert.Contains(t, text, "cannot be asked")
		}
		assert.NotContains(t, a.log.String(), "sk-very-secret-value", "a secret argument reached the log")
	})
}

// TestPolicyInBatches: a call in a JSON-RPC batch (protocol 2025-03-26) is
// checked as a call alone is.
func TestPolicyInBatches(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, policyConfig())
		a.waitLoaded()
		c := newBatchClient(t, a, "2025-03-26")
		raw := c.send(`[{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"forbidden"}}},`+
			`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"fine"}}}]`, true)
		var replies []batchReply
		require.NoError(t, json.Unmarshal(raw, &replies), "%s", raw)
		require.Len(t, replies, 2)
		byID := map[string]json.RawMessage{}
		for _, r := range replies {
			require.Nil(t, r.Error, "%s", raw)
			byID[strings.TrimSpace(string(r.ID))] = r.Result
		}
		text, isErr := policyText(t, byID["11"])
		assert.True(t, isErr)
		assert.Contains(t, text, `policy rule "no-forbidden"`)
		text, isErr = policyText(t, byID["12"])
		assert.False(t, isErr)
		assert.Equal(t, "fine", text)
	})
}
