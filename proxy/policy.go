package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/policy"
)

// verdict is what the policy decided for one call, for the audit log:
// the outcome ("" when no rule matched, else "denied", "approved",
// "declined" or "timeout") and the deciding rule.
type verdict struct {
	outcome string
	rule    string
	// denied is the tool error a policy rule answers the call with; nil
	// when the call goes ahead.
	denied json.RawMessage
}

// admitCall is the one check of a tools/call once it is resolved to its
// server, whichever way it came (tools/call, mcp_call_tool, a batch, a
// task; either protocol generation): first the principal's rate limits,
// whose refusal is the JSON-RPC error over, then the policy list, whose
// denial is v.denied. Without either it costs two nil checks.
func (p *Proxy) admitCall(ctx context.Context, st *state, entry *catalog.Entry, inv *invocation) (over *jsonrpc.Error, v verdict) {
	if st.rates != nil {
		if over, limit := st.rates.take(principalOf(inv.req), entry.Server); over != nil {
			return over, verdict{outcome: "denied", rule: limit}
		}
	}
	if st.policy == nil {
		return nil, v
	}
	denied, v := p.checkPolicy(ctx, st, entry, *inv)
	v.denied = denied
	return nil, v
}

// checkPolicy checks one tool call, resolved to its server and upstream
// name, against the policy list. It is the one place the policy applies,
// whichever way the call came (tools/call, mcp_call_tool, a batch, a
// task; either protocol generation). denied is the tool error to answer
// with when the call may not go ahead; nil lets it through. Without a
// policy it costs a nil check.
func (p *Proxy) checkPolicy(ctx context.Context, st *state, entry *catalog.Entry, inv invocation) (denied json.RawMessage, v verdict) {
	if st.policy == nil {
		return nil, v
	}
	var args map[string]any
	if len(inv.args) > 0 {
		if json.Unmarshal(inv.args, &args) != nil {
			args = nil
		}
	}
	call := policy.Call{Server: entry.Server, Tool: entry.Exported, Original: entry.Original, Method: "tools/call", Args: args}
	if inv.req != nil {
		call.Caller = inv.req.Caller()
		call.Caller.Principal = principalOf(inv.req)
	}
	d := st.policy.Decide(call)
	v.rule = d.Rule
	switch d.Action {
	case policy.Allow:
		return nil, v
	case policy.Deny:
		v.outcome = "denied"
		p.log.Info("policy denied a call", "rule", d.Rule, "tool", entry.Exported, "principal", call.Caller.Principal)
		return denial(d, entry.Exported, ""), v
	}
	// Ask: the client says yes or no, within the rule's timeout.
	v.outcome = p.askApproval(ctx, inv, call, d.Timeout)
	if v.outcome == "approved" {
		return nil, v
	}
	p.log.Info("policy denied a call the client was asked about", "rule", d.Rule, "tool", entry.Exported, "principal", call.Caller.Principal, "answer", v.outcome)
	why := map[string]string{
		"declined":   "the user declined it",
		"timeout":    fmt.Sprintf("no answer came within %s", d.Timeout),
		"unaskable":  "the rule asks the user first, and this client cannot be asked (it declared no elicitation capability, or its requests carry no way to ask)",
		"ask-failed": "asking the user failed",
	}[v.outcome]
	if v.outcome == "unaskable" || v.outcome == "ask-failed" {
		v.outcome = "denied"
	}
	return denial(d, entry.Exported, why), v
}

// denial is the tool error of a call a rule stopped: it names the rule and
// gives its message.
func denial(d policy.Decision, tool, why string) json.RawMessage {
	text := fmt.Sprintf("the call of %s was denied by policy rule %q", tool, d.Rule)
	if why != "" {
		text += ": " + why
	}
	if d.Message != "" {
		text += ". " + d.Message
	}
	return textResult(true, text)
}

// askApproval sends the calling client an elicitation asking whether the
// call may go ahead, the arguments shown with secret-named fields
// redacted: "approved" on accept, "declined" on decline or cancel,
// "timeout" when no answer came within timeout, or "unaskable" when the
// client cannot be asked. A client of protocol 2026-07-28 is asked through
// the bridge (req.Ask of a held request): its answer comes with its retry.
func (p *Proxy) askApproval(ctx context.Context, inv invocation, call policy.Call, timeout time.Duration) string {
	req := inv.req
	if req == nil || req.Ask == nil || !declares(req.ClientCapabilities, "elicitation") {
		return "unaskable"
	}
	shown, _ := json.MarshalIndent(RedactArgs(call.Args), "", "  ")
	who := call.Caller.Principal.String()
	if call.Caller.Client != "" && call.Caller.Principal.Kind == identity.KindSubject {
		who += " (client " + call.Caller.Client + ")"
	}
	message := fmt.Sprintf("Allow %s for %s?\n\nArguments:\n%s", call.Tool, who, shown)
	params, err := rawjson.Marshal(map[string]any{
		"message":         message,
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
	})
	if err != nil {
		return "ask-failed"
	}
	if timeout <= 0 {
		timeout = policy.DefaultAskTimeout
	}
	askCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := req.Ask(askCtx, "elicitation/create", params)
	switch {
	case err != nil && errors.Is(askCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return "timeout"
	case err != nil || resp == nil || resp.Error != nil:
		return "ask-failed"
	}
	var answer struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(resp.Result, &answer) == nil && answer.Action == "accept" {
		return "approved"
	}
	return "declined"
}

// redacted stands for a value RedactArgs hides.
const redacted = "[redacted]"

// RedactArgs is a copy of args with the value of every field whose name
// says it holds a secret (token, password, api_key, ...) replaced, at any
// depth, for showing the arguments to a user or writing them to a log.
func RedactArgs(args map[string]any) map[string]any {
	if args == nil {
		return map[string]any{}
	}
	out, _ := redactValue(args, 0).(map[string]any)
	return out
}

func redactValue(v any, depth int) any {
	if depth > 32 {
		return redacted
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if secretField(k) {
				out[k] = redacted
				continue
			}
			out[k] = redactValue(x[k], depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = redactValue(item, depth+1)
		}
		return out
	}
	return v
}

// secretField reports whether an argument's name says it holds a secret:
// as config.SecretName decides for a variable (token, api_key, password,
// ...), camelCase split into words, and the names of credentials that hold
// none of its words (authorization, bearer, cookie).
func secretField(name string) bool {
	if config.SecretName(strings.ReplaceAll(camelToSnake(name), " ", "_")) {
		return true
	}
	lower := strings.ToLower(name)
	for _, w := range []string{"authorization", "bearer", "cookie", "password", "secret", "token", "credential"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// camelToSnake splits apiKey into api_Key, so that SecretName sees its
// words.
func camelToSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}
