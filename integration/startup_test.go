package integration

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// structured returns a tool result's structuredContent.
func structured(t testing.TB, result json.RawMessage) map[string]any {
	t.Helper()
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(result, &r))
	require.NotEmpty(t, r.StructuredContent, "no structuredContent in %.300s", result)
	return decodeObject(t, r.StructuredContent)
}

// pidOf calls a demo pid tool and returns the pid it reports.
func pidOf(t testing.TB, c *client, tool string) int {
	t.Helper()
	pid, err := structured(t, c.callToolResult(tool, map[string]any{}))["pid"].(json.Number).Int64()
	require.NoError(t, err)
	return int(pid)
}

// status calls mcp_status and decodes its report.
func status(t testing.TB, c *client) map[string]any {
	t.Helper()
	return decodeObject(t, []byte(firstText(t, c.callToolResult("mcp_status", map[string]any{}))))
}

// TestNoConfigServesDemo starts the aggregator with no config anywhere: it must serve
// its built-in demo, whose upstreams are demo servers of the same binary.
func TestNoConfigServesDemo(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, stdioTransport, aggregatorOptions{dir: t.TempDir()})
	a.waitLoaded()
	assert.True(t, a.log.containsLine("no config found"), "the log says the built-in demo is served")
	c := a.connect()

	names := toolNames(t, c.listTools())
	for _, want := range []string{"demo_echo", "demo_add", "demo_pid", "demo_big", "demo_slow", "demo_fail", "demo_env",
		"counter_increment", "counter_get", "counter_pid"} {
		assert.Contains(t, names, want)
	}
	assert.Equal(t, "hi", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "hi"})))
	assert.Equal(t, map[string]any{"value": json.Number("2")},
		structured(t, c.callToolResult("counter_increment", map[string]any{"by": 2})))
	assert.Equal(t, map[string]any{"value": json.Number("2")}, structured(t, c.callToolResult("counter_get", map[string]any{})),
		"the counter keeps its state for this session")

	// The upstreams are real processes of this aggregator (which the survivor check
	// then expects gone after it exits).
	demoPID, counterPID := pidOf(t, c, "demo_pid"), pidOf(t, c, "counter_pid")
	requireMarked(t, a.marker, demoPID)
	requireMarked(t, a.marker, counterPID)
	assert.NotEqual(t, demoPID, counterPID)
	leases, _ := status(t, c)["leases"].([]any)
	assert.Contains(t, leases, map[string]any{"serverId": "counter", "pid": json.Number(strconv.Itoa(counterPID))},
		"mcp_status lists this session's lease")
}

// brokenServersConfig has a server whose command does not exist, one that never
// answers initialize, and a good one.
func brokenServersConfig(t *testing.T, hangTimeout string) string {
	return `version: 1
servers:
  ghost:
    truely-stateless: true
    command: ` + quoted(filepath.Join(t.TempDir(), "no-such-mcp-server")) + `
  hang:
    truely-stateless: true
    ` + demoServer("misbehave", "hang-init") + `
    connect_timeout: ` + hangTimeout + `
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
`
}

// TestFailingServers checks that upstreams that cannot start neither delay the
// downstream initialize nor keep the good upstream out, and that mcp_status names them.
func TestFailingServers(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, brokenServersConfig(t, "1s"))
		c := a.newClient()
		c.initialize()
		// The hanging server keeps the initial load busy for its connect_timeout.
		assert.False(t, a.loaded(), "initialize was answered only after every upstream had started or failed")

		a.waitLoaded()
		names := toolNames(t, c.listTools())
		assert.Contains(t, names, "demo_echo")
		assert.Equal(t, "still here", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "still here"})))
		assert.Equal(t, adminTools, slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, "demo_") }),
			"no tool of a failed server is exported")

		problems, _ := status(t, c)["problems"].([]any)
		assert.True(t, anyContains(stringsOf(problems), "error:", `server "ghost"`), "mcp_status problems: %q", problems)
		assert.True(t, anyContains(stringsOf(problems), "error:", `server "hang"`), "mcp_status problems: %q", problems)
	})
}

// TestSlowServerDoesNotHoldBackOthers gives a server that never answers initialize a
// long connect_timeout: the good server's tools must be callable long before it ends.
func TestSlowServerDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	const hangTimeout = 8 * time.Second
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, brokenServersConfig(t, hangTimeout.String()))
		c := a.connect()
		require.True(t, waitForTool(c, "demo_echo", hangTimeout/2),
			"demo's tools are not exported %s after start: the server that hangs in initialize (connect_timeout %s) holds back a server that started at once",
			hangTimeout/2, hangTimeout)
		assert.Equal(t, "ok", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "ok"})))
	})
}

// waitForTool lists the tools until name is among them, for at most timeout.
func waitForTool(c *client, name string, timeout time.Duration) bool {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for !slices.Contains(toolNames(c.t, c.listTools()), name) {
		if time.Now().After(deadline) {
			return false
		}
		<-poll.C
	}
	return true
}

// stringsOf returns the strings among values.
func stringsOf(values []any) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
