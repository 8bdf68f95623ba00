package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/policy"
)

// TestPolicyAskAnswers: an ask rule's outcome follows the client's answer,
// and no answer within the timeout is a denial of its own.
func TestPolicyAskAnswers(t *testing.T) {
	set, errs := policy.Compile([]policy.Rule{{Name: "ask-all", When: "true", Action: policy.Ask, Message: "be careful", Timeout: 50 * time.Millisecond}})
	require.Empty(t, errs)
	st := &state{policy: set}
	p := &Proxy{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	entry := &catalog.Entry{Server: "db", Exported: "db_drop", Original: "drop"}

	answer := func(result string) func(context.Context, string, json.RawMessage) (*jsonrpc.Message, error) {
		return func(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
			if result == "" {
				<-ctx.Done() // the user never answers
				return nil, ctx.Err()
			}
			return &jsonrpc.Message{Result: json.RawMessage(result)}, nil
		}
	}
	for _, tc := range []struct {
		name, result, outcome string
		denied                bool
	}{
		{"accepted", `{"action":"accept"}`, "approved", false},
		{"declined", `{"action":"decline"}`, "declined", true},
		{"cancelled", `{"action":"cancel"}`, "declined", true},
		{"no answer", "", "timeout", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &downstream.Request{Principal: identity.Local(), Ask: answer(tc.result), ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)}
			denied, v := p.checkPolicy(context.Background(), st, entry, invocation{args: json.RawMessage(`{"table":"users","password":"hunter2"}`), req: req})
			assert.Equal(t, tc.outcome, v.outcome)
			assert.Equal(t, "ask-all", v.rule)
			assert.Equal(t, tc.denied, denied != nil, "%s", denied)
			if denied != nil {
				assert.Contains(t, string(denied), `policy rule \"ask-all\"`)
				assert.Contains(t, string(denied), "be careful")
			}
		})
	}
}

func TestRedactArgs(t *testing.T) {
	got := RedactArgs(map[string]any{"query": "x", "apiKey": "k", "nested": map[string]any{"client_secret": "s", "list": []any{map[string]any{"Authorization": "a"}}}})
	assert.Equal(t, map[string]any{"query": "x", "apiKey": "[redacted]", "nested": map[string]any{"client_secret": "[redacted]",
		"list": []any{map[string]any{"Authorization": "[redacted]"}}}}, got)
}
