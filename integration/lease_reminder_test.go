package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeaseReminderKeepsTheResultBytes: the first call to a leased server
// gets the lease reminder as one more content item; the rest of the
// upstream's result is the bytes it sent (the members of fidelity's rich
// result are in no sorted order, and hold numbers no float64 holds), the
// same as a call to a shared instance of the server gets.
func TestLeaseReminderKeepsTheResultBytes(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, fmt.Sprintf(`version: 1
servers:
  shared:
    truely-stateless: true
    %s
    transform: [{prefix: shared_}]
  leased:
    %s
    transform: [{prefix: leased_}]
`, demoServer("fidelity"), demoServer("fidelity")))
	a.waitLoaded()
	c := a.connect()
	plain := c.callToolResult("shared_rich", map[string]any{})
	reminded := c.callToolResult("leased_rich", map[string]any{})

	var result struct {
		Content []json.RawMessage `json:"content"`
	}
	require.NoError(t, json.Unmarshal(reminded, &result))
	require.NotEmpty(t, result.Content)
	last := result.Content[len(result.Content)-1]
	assert.Contains(t, string(last), "You now hold a dedicated instance of MCP server")
	item := append([]byte{','}, last...)
	require.Equal(t, 1, bytes.Count(reminded, item), "%s", reminded)
	assert.Equal(t, string(plain), string(bytes.Replace(reminded, item, nil, 1)),
		"the result is the upstream's bytes but the reminder")
}
