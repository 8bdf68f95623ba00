package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// policyConfig denies echoing "forbidden" and asks before echoing
// anything that starts with "ask"; the api_key argument is a secret the
// question must not show.
func policyConfig(auditTo string) string {
	return fmt.Sprintf(`version: 1
discovery: {mode: search}
audit: {to: %q, args: true}
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
`, auditTo, demoServer("tools"))
}

// auditLines reads the audit log at path, waiting until it holds n lines.
func auditLines(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	var lines []map[string]any
	require.Eventually(t, func() bool {
		raw, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		lines = nil
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), "%s", l)
			lines = append(lines, m)
		}
		return len(lines) >= n
	}, callTimeout, 20*time.Millisecond, "the audit log holds %d lines", n)
	return lines
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
		auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
		a := serveConfig(t, tr, policyConfig(auditPath))
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

		// One audit line per call, in order, with the policy's outcome.
		want := []struct{ outcome, rule string }{
			{"denied", "no-forbidden"}, {"ok", ""}, {"approved", "ask-first"}, {"declined", "ask-first"},
		}
		n := 2 * len(want)
		if tr == httpTransport {
			n++
		}
		lines := auditLines(t, auditPath, n)
		for i, line := range lines[:2*len(want)] {
			w := want[i%len(want)]
			assert.Equal(t, w.outcome, line["outcome"], "line %d: %v", i, line)
			assert.Equal(t, w.rule, orEmpty(line["rule"]), "line %d", i)
			assert.Equal(t, "demo_echo", line["tool"])
			assert.Equal(t, "echo", line["original"])
			assert.Equal(t, "demo", line["server"])
			assert.Equal(t, "tools/call", line["method"])
			assert.Equal(t, map[string]any{"kind": "local"}, line["principal"])
			assert.Len(t, line["args_sha256"], 64)
			assert.Contains(t, line, "duration_ms")
		}
		assert.Equal(t, map[string]any{"text": "ask me", "api_key": "[redacted]"}, lines[2]["args"], "the arguments, a secret redacted")
		if tr == httpTransport {
			assert.Equal(t, "denied", lines[8]["outcome"], "a client that cannot be asked is denied")
			assert.NotEmpty(t, lines[0]["session"], "an HTTP call names its session, by digest")
		}
		raw, err := os.ReadFile(auditPath)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), "sk-very-secret-value", "a secret reached the audit log")
	})
}

// TestPolicyInBatches: a call in a JSON-RPC batch (protocol 2025-03-26) is
// checked as a call alone is.
func TestPolicyInBatches(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, policyConfig(filepath.Join(t.TempDir(), "audit.jsonl")))
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

// orEmpty is a JSON member's string, "" when absent.
func orEmpty(v any) string {
	s, _ := v.(string)
	return s
}

// TestPolicyReloads: rules follow config edits; a reload whose rule does
// not compile is rejected whole, and the last good rules stay.
func TestPolicyReloads(t *testing.T) {
	config := func(word, when string) string {
		return fmt.Sprintf(`version: 1
policy:
  - name: no-%s
    when: '%s'
    action: deny
servers:
  demo:
    truely-stateless: true
    %s
    transform: [{prefix: demo_}]
`, word, when, demoServer("tools"))
	}
	denied := func(c *client, text string) bool {
		out, isErr := policyText(t, c.callToolResult("demo_echo", map[string]any{"text": text}))
		return isErr && strings.Contains(out, "policy rule")
	}
	r := newReloadRig(t, stdioTransport, config("red", `has(args.text) && args.text == "red"`))
	assert.True(t, denied(r.c, "red"))
	assert.False(t, denied(r.c, "blue"))

	r.save(config("blue", `has(args.text) && args.text == "blue"`))
	r.waitReload()
	assert.False(t, denied(r.c, "red"), "the edited rule replaced the old one")
	assert.True(t, denied(r.c, "blue"))

	r.save(config("broken", `args.text ==`))
	r.waitReload()
	assert.True(t, r.a.log.containsLine("config rejected; keeping the last good config"))
	assert.True(t, denied(r.c, "blue"), "the last good rules stay")
	assert.False(t, denied(r.c, "red"))
}

// TestPolicyCheckReportsRuleErrors: check reports a rule's CEL syntax or
// type error with the file and line of its expression, and exits 1.
func TestPolicyCheckReportsRuleErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, when, want string }{
		{"syntax", `tool ==`, "Syntax error"},
		{"type", `tool == 3`, "no matching overload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeConfig(t, fmt.Sprintf("version: 1\npolicy:\n  - name: r\n    action: deny\n    when: '%s'\nservers:\n  demo:\n    %s\n", tc.when, demoServer("tools")))
			res := runCLI(t, "check", "--config", file)
			assert.Equal(t, 1, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			out := res.stdout + res.stderr
			assert.Contains(t, out, file+":5: ")
			assert.Contains(t, out, "policy.r.when")
			assert.Contains(t, out, tc.want)
		})
	}
}

// TestPolicyAskInBatches: a call in a JSON-RPC batch that a rule asks
// about sends the client an elicitation, over stdio and HTTP; the batch's
// other members are answered too (over HTTP, on the batch's stream before
// the question is answered), and the call goes ahead when the client
// accepts and is refused when it declines, each with its audit line.
func TestPolicyAskInBatches(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
		a := serveConfig(t, tr, policyConfig(auditPath))
		a.waitLoaded()
		c := newBatchClientWith(t, a, "2025-03-26", `{"elicitation":{}}`)
		var asked []string

		// runBatch sends batch and answers each elicitation with action
		// until every member of want has its answer.
		runBatch := func(batch, action string, want int) map[string]json.RawMessage {
			t.Helper()
			byID := map[string]json.RawMessage{}
			// Over HTTP the question is answered only once the batch's other
			// call was answered on the stream: it does not wait for the ask.
			held := ""
			reply := func(answer string) {
				if c.out != nil {
					_, err := io.WriteString(a.stdin, answer+"\n")
					require.NoError(t, err)
				} else {
					assert.Equal(t, http.StatusAccepted, coreMessageBody(t, a, c.session, c.version, answer))
				}
			}
			// handle takes one message from the gateway; false once the
			// batch is answered.
			handle := func(msg []byte) bool {
				msg = bytes.TrimSpace(msg)
				if len(msg) > 0 && msg[0] == '[' {
					var replies []batchReply
					require.NoError(t, json.Unmarshal(msg, &replies), "%s", msg)
					for _, r := range replies {
						require.Nil(t, r.Error, "%s", msg)
						byID[strings.TrimSpace(string(r.ID))] = r.Result
					}
					return len(byID) < want
				}
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						Message string `json:"message"`
					} `json:"params"`
					Result json.RawMessage `json:"result"`
				}
				require.NoError(t, json.Unmarshal(msg, &m), "%s", msg)
				switch {
				case m.Method == "elicitation/create":
					asked = append(asked, m.Params.Message)
					answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":%q}}`, m.ID, action)
					if c.out != nil || len(byID) > 0 {
						reply(answer)
					} else {
						held = answer
					}
				case m.Method == "" && m.ID != nil:
					byID[strings.TrimSpace(string(m.ID))] = m.Result
					if held != "" {
						reply(held)
						held = ""
					}
				}
				return len(byID) < want
			}
			if c.out != nil {
				_, err := io.WriteString(a.stdin, strings.ReplaceAll(batch, "\n", "")+"\n")
				require.NoError(t, err)
				for {
					line, err := c.out.ReadBytes('\n')
					require.NoError(t, err)
					if !handle(line) {
						return byID
					}
				}
			}
			req, err := http.NewRequest(http.MethodPost, a.url, strings.NewReader(batch))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", c.session)
			req.Header.Set("MCP-Protocol-Version", c.version)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				require.NoError(t, readSSE(resp.Body, handle))
			} else {
				raw, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				handle(raw)
			}
			require.Len(t, byID, want, "every member is answered")
			return byID
		}

		got := runBatch(`[{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"ask me"}}},
{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"fine"}}}]`, "accept", 2)
		text, isErr := policyText(t, got["21"])
		assert.False(t, isErr)
		assert.Equal(t, "ask me", text, "approved: the call went ahead")
		text, _ = policyText(t, got["22"])
		assert.Equal(t, "fine", text)

		got = runBatch(`[{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"ask again"}}},
{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"demo_echo","arguments":{"text":"fine too"}}}]`, "decline", 2)
		text, isErr = policyText(t, got["31"])
		assert.True(t, isErr)
		assert.Contains(t, text, `policy rule "ask-first"`)
		text, _ = policyText(t, got["32"])
		assert.Equal(t, "fine too", text)

		require.Len(t, asked, 2, "each ask reached the client once")
		assert.Contains(t, asked[0], "demo_echo")
		outcomes := map[string]string{}
		for _, l := range auditLines(t, auditPath, 4) {
			args, _ := l["args"].(map[string]any)
			outcomes[orEmpty(args["text"])] = orEmpty(l["outcome"]) + " " + orEmpty(l["rule"])
		}
		assert.Equal(t, map[string]string{"ask me": "approved ask-first", "fine": "ok ", "ask again": "declined ask-first", "fine too": "ok "}, outcomes)
	})
}
