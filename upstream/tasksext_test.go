package upstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
)

// A request made for a client that declared the tasks extension declares
// it to a 2026-07-28 upstream, beside the aggregator's other capabilities;
// any other request does not.
func TestEnvelopeDeclaresTasksExtensionPerRequest(t *testing.T) {
	env := newEnvelope("2026-07-28", "mcp-aggregator", "test", clientCapabilities)
	capsOf := func(ctx context.Context) map[string]any {
		t.Helper()
		raw, err := env.forRequest(ctx).wrap(json.RawMessage(`{"name":"x"}`))
		require.NoError(t, err)
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		require.NoError(t, json.Unmarshal(raw, &p))
		var caps map[string]any
		require.NoError(t, json.Unmarshal(p.Meta[protocol.MetaClientCapabilities], &caps))
		return caps
	}
	plain := capsOf(context.Background())
	assert.NotContains(t, plain["extensions"], TasksExtension)
	marked := capsOf(WithTasksExtension(context.Background()))
	assert.Equal(t, map[string]any{}, marked["extensions"].(map[string]any)[TasksExtension])
	assert.Contains(t, marked["extensions"], "io.modelcontextprotocol/ui", "the others stay")
	assert.Equal(t, plain["sampling"], marked["sampling"])
	assert.NotContains(t, capsOf(context.Background())["extensions"], TasksExtension, "the envelope itself is unchanged")
}

// tasks/get, tasks/update and tasks/cancel name their task in Mcp-Name.
func TestTaskRequestsNameTheTaskInMcpName(t *testing.T) {
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		h := standardHeaders("2026-07-28", method, json.RawMessage(`{"taskId":"t-1","inputResponses":{}}`))
		assert.Equal(t, method, h.Get("Mcp-Method"))
		assert.Equal(t, "t-1", h.Get("Mcp-Name"), method)
	}
	assert.Empty(t, standardHeaders("2025-11-25", "tasks/get", json.RawMessage(`{"taskId":"t-1"}`)).Get("Mcp-Name"), "older generations have no such headers")
}
