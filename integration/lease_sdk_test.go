package integration

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leaseSDKReply decodes the outcome of one callTool step of node/sdkclient.mjs.
func leaseSDKReply(t *testing.T, step json.RawMessage) leaseReply {
	t.Helper()
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(step, &out))
	require.NotEmpty(t, out.Result, "the SDK client got no result: %s", out.Error)
	r, err := leaseDecode(out.Result)
	require.NoError(t, err)
	return r
}

// TestLeaseSDKClients drives the aggregator with two official TypeScript SDK clients
// at once: each HTTP session gets its own counter instance, and the SDK passes the
// lease reminder through as an ordinary text item.
func TestLeaseSDKClients(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("counter", "counter", false)))
	a.waitLoaded()
	steps := []map[string]any{
		{"op": "callTool", "name": "counter_increment", "arguments": map[string]any{}},
		{"op": "callTool", "name": "counter_increment", "arguments": map[string]any{}},
		{"op": "callTool", "name": "counter_pid", "arguments": map[string]any{}},
	}
	pids := make([]int, 2)
	t.Run("clients", func(t *testing.T) {
		for i := range pids {
			t.Run(fmt.Sprintf("sdk-%d", i), func(t *testing.T) {
				t.Parallel()
				results := runSDKClient(t, newMarker(), steps, "--http", a.url)

				first := leaseSDKReply(t, results[0])
				require.NotNil(t, first.Value)
				assert.Equal(t, 1, *first.Value, "the session's instance counts only its own increments")
				require.Len(t, first.Texts, 2, "the first result carries the reminder: %s", first.Raw)
				assert.Contains(t, first.Texts[1], "mcp_release")
				assert.Contains(t, first.Texts[1], `"counter"`)

				second := leaseSDKReply(t, results[1])
				require.NotNil(t, second.Value)
				assert.Equal(t, 2, *second.Value, "both calls of the session ran on one instance")
				assert.Equal(t, []string{"2"}, second.Texts, "only the lease's first result reminds")

				pid := leaseSDKReply(t, results[2]).PID
				require.NotNil(t, pid)
				pids[i] = *pid
			})
		}
	})
	if t.Failed() {
		return // the clients' own failures say what went wrong
	}
	assert.NotEqual(t, pids[0], pids[1], "two SDK sessions shared an instance")
	// Each SDK client ends its session with DELETE before it exits, which ends its lease.
	for _, pid := range pids {
		leaseWaitEvent(t, a, "session-ended", "counter", pid)
		waitGone(t, pid)
	}
}
