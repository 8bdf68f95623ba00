package integration

import (
	"regexp"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opsTotal sums every series of the counter family name.
func opsTotal(fams map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	return total
}

// TestOpsCallThroughCountsOnce calls tools through mcp_call_tool in search mode: each
// tools/call counts once in mcp_aggregator_tool_calls_total, as the tool it named,
// and mcp_call_tool counts as itself only when it names no tool it can run.
func TestOpsCallThroughCountsOnce(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, strings.Replace(opsConfig(), "version: 1\n", "version: 1\ndiscovery: {mode: search}\n", 1))
	a.waitLoaded()
	c := a.connect()

	for range 2 {
		c.callToolResult("mcp_call_tool", map[string]any{"name": "demo_echo", "arguments": map[string]any{"text": "through"}})
	}
	c.callToolResult("demo_echo", map[string]any{"text": "direct"})
	c.callToolResult("mcp_call_tool", map[string]any{"name": "ctr_increment", "arguments": map[string]any{}})
	c.callToolResult("mcp_call_tool", map[string]any{"name": "demo_fail", "arguments": map[string]any{"message": "on purpose"}})
	c.callToolResult("mcp_call_tool", map[string]any{"name": "demo_ecoh"}) // no such tool: answered by mcp_call_tool
	const made = 6

	fams := opsScrape(t, a)
	calls := "mcp_aggregator_tool_calls_total"
	assert.Equal(t, 3.0, opsValue(t, fams, calls, map[string]string{"server": "demo", "tool": "demo_echo", "outcome": "ok"}))
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "counter", "tool": "ctr_increment", "outcome": "ok"}))
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "demo", "tool": "demo_fail", "outcome": "tool_error"}))
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "mcp_admin", "tool": "mcp_call_tool", "outcome": "tool_error"}),
		"a name no server exports is mcp_call_tool's own answer")
	_, ok := opsSeries(fams, calls, map[string]string{"server": "mcp_admin", "tool": "mcp_call_tool", "outcome": "ok"})
	assert.False(t, ok, "a call that ran a tool counts as that tool's only")
	assert.Equal(t, float64(made), opsTotal(fams, calls), "one count per tools/call")

	durations := "mcp_aggregator_tool_call_duration_seconds"
	assert.Equal(t, 4.0, opsValue(t, fams, durations, map[string]string{"server": "demo"}))
	assert.Equal(t, 1.0, opsValue(t, fams, durations, map[string]string{"server": "counter"}))
	assert.Equal(t, 1.0, opsValue(t, fams, durations, map[string]string{"server": "mcp_admin"}))
}

// opsLeasedPID is the pid of server's one leased instance on /status.json.
func opsLeasedPID(t *testing.T, a *aggregator, server string) int {
	t.Helper()
	st, raw := opsStatusJSON(t, a)
	pid := 0
	for _, in := range st.Instances {
		if in.Server == server && in.Role == "leased" {
			require.Zero(t, pid, "one leased instance of %s: %s", server, raw)
			pid = in.PID
		}
	}
	require.NotZero(t, pid, "no leased instance of %s: %s", server, raw)
	return pid
}

// TestOpsLostLeaseCountsAsRestart kills a session's dedicated instance: the session's
// next call runs on a fresh one, which counts in upstream_restarts_total as a shared
// instance's restart does, and the loss in upstream_crashes_total.
func TestOpsLostLeaseCountsAsRestart(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, opsConfig())
	a.waitLoaded()
	c := a.connect()
	c.callToolResult("ctr_increment", map[string]any{})
	lost := opsLeasedPID(t, a, "counter")

	require.NoError(t, syscall.Kill(lost, syscall.SIGKILL))
	relLogLine(t, a, relRecoverTimeout, `msg="upstream exited"`, "server=counter")
	texts := relTexts(t, c.callToolResult("ctr_increment", map[string]any{}))
	assert.True(t, containsAll(strings.Join(texts, "\n"), "stopped unexpectedly"), "the call ran on a fresh instance: %q", texts)
	assert.NotEqual(t, lost, opsLeasedPID(t, a, "counter"))

	fams := opsScrape(t, a)
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_upstream_crashes_total", map[string]string{"server": "counter"}))
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_upstream_restarts_total", map[string]string{"server": "counter"}))
	assert.Equal(t, 0.0, opsValue(t, fams, "mcp_aggregator_upstream_restarts_total", map[string]string{"server": "demo"}))
}

// opsLoggedSession is the session a log line names.
var opsLoggedSession = regexp.MustCompile(` session=(\S+)`)

// TestOpsOneSessionOneName follows one HTTP session through the log and the status:
// the line that opens it, the lease line and /status.json name it by one digest.
func TestOpsOneSessionOneName(t *testing.T) {
	t.Parallel()
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, opsConfig())}, flags: []string{"--session-id-prefix", "r1-"}})
	a.waitLoaded()
	c := a.connect()
	id := coreSessionOf(t, c)
	named := func(line string) string {
		m := opsLoggedSession.FindStringSubmatch(line)
		require.NotNil(t, m, "no session in %q", line)
		return m[1]
	}
	opened := named(relLogLine(t, a, startTimeout, `msg="session opened"`))
	assert.Regexp(t, `^[0-9a-f]{12}$`, opened)
	assert.NotContains(t, id, opened, "a log names a session by a digest, never by a piece of its id")

	c.callToolResult("ctr_increment", map[string]any{})
	assert.Equal(t, opened, named(relLogLine(t, a, startTimeout, `msg="lease leased"`, "server=counter")))
	st, raw := opsStatusJSON(t, a)
	var onStatus []string
	for _, in := range st.Instances {
		if in.Role == "leased" {
			onStatus = append(onStatus, in.Session)
		}
	}
	assert.Equal(t, []string{opened}, onStatus, "%s", raw)
}
