package integration

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBusySessionIsNotSwept: an HTTP session that does nothing but call
// tools is alive, even though those calls are served without passing through
// mcp-go's session bookkeeping; with a 2s idle TTL it keeps its session and its
// lease across 5s of steady calls.
func TestBusySessionIsNotSwept(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf(`version: 1
servers:
  counter:
    %s
    transform: [{prefix: c_}]
`, demoServer("counter")))},
		flags: []string{"--session-idle-ttl", ttl.String()},
	})
	a.waitLoaded()
	c := a.connect()
	pid := func() int {
		var res struct {
			Structured struct {
				PID int `json:"pid"`
			} `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(c.callToolResult("c_pid", map[string]any{}), &res))
		return res.Structured.PID
	}
	first := pid()
	deadline := time.Now().Add(5 * time.Second) // well past the TTL: the point of the test
	calls := 0
	for time.Now().Before(deadline) {
		<-time.After(300 * time.Millisecond) // steady traffic, as an agent at work
		resp := c.callTool("c_increment", map[string]any{})
		require.Empty(t, resp.Error, "a busy session lost its session or lease: %s", resp.Error)
		calls++
	}
	assert.Equal(t, first, pid(), "the lease survived")
	assert.False(t, a.log.containsLine("lease session-ended"), "the busy session was swept as idle")
	assert.Equal(t, calls, counterOf(t, c.callToolResult("c_get", map[string]any{})), "every increment landed on the same instance")
}
