package proxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// TestAskURLElicitationNeedsURLCapability: elicitation: {} declares form mode alone,
// so a URL-mode elicitation/create is refused, naming the capability, and never
// reaches the client; form mode goes through, and so does URL mode to a client that
// declared it.
func TestAskURLElicitationNeedsURLCapability(t *testing.T) {
	urlParams := json.RawMessage(`{"mode":"url","url":"https://example.com/x","message":"m","elicitationId":"e1"}`)
	formParams := json.RawMessage(`{"message":"m","requestedSchema":{"type":"object","properties":{}}}`)
	for _, tc := range []struct {
		name   string
		caps   string
		params json.RawMessage
		relay  bool
	}{
		{"url to a form-only client", `{"elicitation":{}}`, urlParams, false},
		{"url to a client with form only, spelled out", `{"elicitation":{"form":{}}}`, urlParams, false},
		{"url to a url client", `{"elicitation":{"url":{}}}`, urlParams, true},
		{"form to a form-only client", `{"elicitation":{}}`, formParams, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := false
			send := func(context.Context, string, json.RawMessage) (*jsonrpc.Message, error) {
				sent = true
				return &jsonrpc.Message{Result: json.RawMessage(`{"action":"accept"}`)}, nil
			}
			res, rpcErr := ask(context.Background(), json.RawMessage(tc.caps), send, "elicitation/create", tc.params)
			assert.Equal(t, tc.relay, sent)
			if tc.relay {
				require.Nil(t, rpcErr)
				assert.JSONEq(t, `{"action":"accept"}`, string(res))
				return
			}
			require.NotNil(t, rpcErr)
			assert.Contains(t, rpcErr.Message, "elicitation.url")
		})
	}
}
