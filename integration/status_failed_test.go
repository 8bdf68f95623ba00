package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatusNamesTransportAndModeOfServerThatNeverStarted: servers that fail on
// the first load, and so never ran, are listed by mcp_status with the transport
// and mode (shared or leased) of their config, as running servers are.
func TestStatusNamesTransportAndModeOfServerThatNeverStarted(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+serverYAML("missing", missingCommand(t))+
		serverYAML("gone", statelessServer, fmt.Sprintf("url: http://127.0.0.1:%d/mcp", freePort(t)))+
		serverYAML("demo", statelessServer, demoServer("tools")))
	a.waitLoaded()
	c := a.connect()
	text := firstText(t, c.callToolResult("mcp_status", map[string]any{}))
	var st struct {
		Servers []map[string]any `json:"servers"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &st), "mcp_status: %s", text)
	got := map[string]string{}
	for _, s := range st.Servers {
		id, _ := s["id"].(string)
		line, err := json.Marshal(map[string]any{"transport": s["transport"], "mode": s["mode"]})
		require.NoError(t, err)
		got[id] = string(line)
	}
	require.Contains(t, got, "missing", "mcp_status: %s", text)
	require.Contains(t, got, "gone", "mcp_status: %s", text)
	assert.JSONEq(t, `{"transport": "stdio", "mode": "leased"}`, got["missing"], "mcp_status: %s", text)
	assert.JSONEq(t, `{"transport": "streamable_http", "mode": "shared"}`, got["gone"], "mcp_status: %s", text)
	assert.JSONEq(t, `{"transport": "stdio", "mode": "shared"}`, got["demo"], "a running server, for comparison: %s", text)
}

// TestStatusListsServerWhoseToolsBreakStrictMode: a server that starts on the
// first load but whose tools break its strict mode runs nothing, and mcp_status
// lists it as failed, saying why, as it lists a server that could not start.
func TestStatusListsServerWhoseToolsBreakStrictMode(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, relStrictConfig())
	a.waitLoaded()
	c := a.connect()
	st := relStatus(t, c)
	health, listed := st.relHealth("strictbad")
	require.True(t, listed, "mcp_status lists no server strictbad: %+v", st.Servers)
	assert.True(t, strings.HasPrefix(health, "failed: "), "health: %q", health)
	errors := 0 // the problems list has each of them
	for _, pr := range st.Problems {
		if containsAll(pr, "error:", `server "strictbad"`, "is not configured") {
			errors++
		}
	}
	require.Greater(t, errors, 1, "problems: %q", st.Problems)
	more := fmt.Sprintf("(and %d more errors)", errors-1)
	assert.True(t, containsAll(health, `offered by server "strictbad" is not configured`, more, "fix the config to retry"), "health: %q", health)
	assert.NotContains(t, health, "\n", "one line")
	for _, id := range []string{"strictgood", "demo"} {
		h, _ := st.relHealth(id)
		assert.Equal(t, "ok", h, "server %q", id)
	}
}

// TestStatusListsServerStillStarting: while the first load waits for a server
// that hangs in initialize, mcp_status lists it with health "starting" and the
// transport and mode of its config, next to the servers already running.
func TestStatusListsServerStillStarting(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, fmt.Sprintf(`version: 1
servers:
  slow:
    truely-stateless: true
    %s
    connect_timeout: 10m
  demo:
    truely-stateless: true
    %s
`, demoServer("misbehave", "hang-init"), demoServer("tools")))
	c := a.connect()
	relWaitHealth(t, c, "demo", func(h string) bool { return h == "ok" }, startTimeout)
	text := firstText(t, c.callToolResult("mcp_status", map[string]any{}))
	var st struct {
		Servers []json.RawMessage `json:"servers"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &st), "mcp_status: %s", text)
	var slow json.RawMessage
	for _, s := range st.Servers {
		var head struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(s, &head))
		if head.ID == "slow" {
			slow = s
		}
	}
	require.NotNil(t, slow, "mcp_status lists no server slow: %s", text)
	require.False(t, a.loaded(), "the first load has ended: slow no longer starts; stderr:\n%s", a.log)
	assert.JSONEq(t, `{"id": "slow", "transport": "stdio", "mode": "shared", "health": "starting", "tools": 0, "instances": 0}`, string(slow))
}
