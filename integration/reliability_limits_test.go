package integration

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relProgressTokens returns the progress tokens (as raw JSON text) of the progress
// notifications among notes, in arrival order.
func relProgressTokens(t testing.TB, notes []notification) []string {
	t.Helper()
	var tokens []string
	for _, n := range notes {
		if n.Method != "notifications/progress" {
			continue
		}
		var p struct {
			Token json.RawMessage `json:"progressToken"`
		}
		require.NoError(t, json.Unmarshal(n.Params, &p))
		tokens = append(tokens, string(p.Token))
	}
	return tokens
}

// relWaitProgress waits for the first progress notification carrying token.
func relWaitProgress(t testing.TB, c *client, token string) {
	t.Helper()
	want := quoted(token)
	_, ok := c.waitNotification(func(n notification) bool {
		return n.Method == "notifications/progress" && len(relProgressTokens(t, []notification{n})) == 1 &&
			relProgressTokens(t, []notification{n})[0] == want
	}, startTimeout)
	require.True(t, ok, "no progress notification for token %s", token)
}

// TestReliabilityTimeouts checks request_timeout, its per-tool overrides, that the
// error of a call past its limit names the setting that set it, and that progress
// pushes the deadline back.
func TestReliabilityTimeouts(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		demoEntry("demo", "demo_", "tools", statelessServer, "request_timeout: 500ms")+
		demoEntry("pertool", "pt_", "tools", statelessServer, "request_timeout: 30s", "tools: {config: {slow: {timeout: 300ms}}}")+
		demoEntry("bydefault", "bd_", "tools", statelessServer, "request_timeout: 30s", "tools: {defaults: {timeout: 400ms}}"))
	a.waitLoaded()
	c := a.connect()

	t.Run("request_timeout", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "cancelled")
		o := relCall(c, "demo_slow", map[string]any{"seconds": 30, "marker": marker}, nil)
		msg := relErrorMessage(t, o)
		assert.Contains(t, msg, `server "demo"`)
		assert.Contains(t, msg, `tool "demo_slow"`, "the error names the tool")
		assert.Contains(t, msg, "500ms", "the error names the limit")
		assert.Contains(t, msg, "request_timeout", "the error names the setting of the limit")
		assert.NotContains(t, msg, "tools.", "no per-tool setting is in force")
		assert.GreaterOrEqual(t, o.elapsed, 500*time.Millisecond, "the call ended before its timeout")
		relAssertFast(t, o, "a call with a 500ms timeout")
		content, ok := waitForFile(t, marker, 20*time.Second)
		require.True(t, ok, "the upstream never wrote its cancellation marker: it was not sent notifications/cancelled")
		assert.Equal(t, "cancelled", string(content))
	})

	t.Run("per-tool timeout overrides request_timeout", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "cancelled")
		o := relCall(c, "pt_slow", map[string]any{"seconds": 30, "marker": marker}, nil)
		msg := relErrorMessage(t, o)
		assert.Contains(t, msg, `tool "pt_slow"`)
		assert.Contains(t, msg, "300ms", "the error names the per-tool limit, not request_timeout")
		assert.Contains(t, msg, "tools.config.slow.timeout", "the error says how to raise it")
		assert.NotContains(t, msg, "request_timeout", "raising request_timeout would change nothing")
		assert.GreaterOrEqual(t, o.elapsed, 300*time.Millisecond)
		relAssertFast(t, o, "a call with a 300ms per-tool timeout (request_timeout 30s)")
		_, ok := waitForFile(t, marker, 20*time.Second)
		assert.True(t, ok, "the upstream never wrote its cancellation marker")

		// Other tools of the server keep request_timeout.
		assert.Equal(t, "done after 4 steps", firstText(t, relResult(t,
			relCall(c, "pt_slow", map[string]any{"seconds": 0.05, "steps": 4}, nil))), "a short call stays under the per-tool timeout")
	})

	t.Run("tools.defaults timeout overrides request_timeout", func(t *testing.T) {
		o := relCall(c, "bd_slow", map[string]any{"seconds": 30}, nil)
		msg := relErrorMessage(t, o)
		assert.Contains(t, msg, `tool "bd_slow"`)
		assert.Contains(t, msg, "400ms set by tools.defaults.timeout", "the error names the limit and its setting")
		assert.NotContains(t, msg, "request_timeout", "raising request_timeout would change nothing")
		assert.NotContains(t, msg, "tools.config", "the tool has no tools.config entry")
		assert.GreaterOrEqual(t, o.elapsed, 400*time.Millisecond)
		relAssertFast(t, o, "a call with a 400ms tools.defaults timeout (request_timeout 30s)")
	})

	t.Run("progress resets the deadline", func(t *testing.T) {
		// 12 steps of 100ms each: the whole call takes 1.2s, more than twice the
		// 500ms timeout, but no gap between progress notifications comes near it.
		o := relCall(c, "demo_slow", map[string]any{"seconds": 1.2, "steps": 12}, map[string]any{"progressToken": "reset"})
		assert.Equal(t, "done after 12 steps", firstText(t, relResult(t, o)))
		assert.GreaterOrEqual(t, o.elapsed, 1200*time.Millisecond)
	})

	t.Run("the aggregator is still fine", func(t *testing.T) {
		assert.Equal(t, "ok", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "ok"})))
	})
}

// TestReliabilityMaxConcurrent checks limits.max_concurrent: calls over the limit wait
// for a slot, and fail with an error that names the limit when their deadline passes
// first.
func TestReliabilityMaxConcurrent(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nlimits: {max_concurrent: 1}\nservers:\n"+
		demoEntry("demo", "demo_", "tools", statelessServer, "request_timeout: 30s")+
		demoEntry("short", "short_", "tools", statelessServer, "request_timeout: 300ms"))
	a.waitLoaded()
	c := a.connect()

	t.Run("calls over the limit wait", func(t *testing.T) {
		args := map[string]any{"seconds": 0.5, "steps": 5}
		start := time.Now()
		first := relStartCall(c, "demo_slow", args, map[string]any{"progressToken": "first"})
		second := relStartCall(c, "demo_slow", args, map[string]any{"progressToken": "second"})
		for _, ch := range []<-chan relOutcome{first, second} {
			assert.Equal(t, "done after 5 steps", firstText(t, relResult(t, relAwait(t, ch))))
		}
		elapsed := time.Since(start)
		notes, _ := c.inbox.snapshot()
		tokens := relProgressTokens(t, notes)
		require.Len(t, tokens, 10, "progress of both calls: %q", tokens)
		// Whichever call got the slot ran to its end before the other began.
		assert.Equal(t, []string{tokens[0], tokens[0], tokens[0], tokens[0], tokens[0]}, tokens[:5], "the calls overlapped: %q", tokens)
		assert.Equal(t, []string{tokens[5], tokens[5], tokens[5], tokens[5], tokens[5]}, tokens[5:], "the calls overlapped: %q", tokens)
		assert.NotEqual(t, tokens[0], tokens[5])
		assert.GreaterOrEqual(t, elapsed, time.Second, "two 0.5s calls under max_concurrent 1")
	})

	t.Run("a call that cannot get a slot in time", func(t *testing.T) {
		// The running call reports progress every 100ms, which keeps its own
		// deadline away; the waiting one has none.
		running := relStartCall(c, "demo_slow", map[string]any{"seconds": 1.5, "steps": 15}, map[string]any{"progressToken": "holder"})
		relWaitProgress(t, c, "holder")
		o := relCall(c, "short_echo", map[string]any{"text": "never runs"}, nil)
		msg := relErrorMessage(t, o)
		assert.Contains(t, msg, `server "short"`)
		assert.Contains(t, msg, "limits.max_concurrent (1)", "the error names the limit")
		assert.Contains(t, msg, "300ms set by request_timeout", "the error names how long the call waited, and the setting behind it")
		relAssertFast(t, o, "a call waiting for a slot with a 300ms timeout")
		assert.Equal(t, "done after 15 steps", firstText(t, relResult(t, relAwait(t, running))), "the running call is not disturbed")
		assert.Equal(t, "now", firstText(t, relResult(t, relCall(c, "short_echo", map[string]any{"text": "now"}, nil))),
			"the slot is free again")
	})
}

// TestReliabilityMaxInstances checks tools.config.<tool>.max_instances: it limits
// concurrent calls of that tool only.
func TestReliabilityMaxInstances(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		demoEntry("demo", "demo_", "tools", statelessServer, "request_timeout: 30s", "tools: {config: {slow: {max_instances: 1, timeout: 300ms}}}"))
	a.waitLoaded()
	c := a.connect()

	running := relStartCall(c, "demo_slow", map[string]any{"seconds": 1.5, "steps": 15}, map[string]any{"progressToken": "holder"})
	relWaitProgress(t, c, "holder")

	o := relCall(c, "demo_slow", map[string]any{"seconds": 0.01, "steps": 1}, nil)
	msg := relErrorMessage(t, o)
	assert.Contains(t, msg, `tool "demo_slow"`)
	assert.Contains(t, msg, "max_instances", "the error names the limit")
	relAssertFast(t, o, "a call waiting for a max_instances slot with a 300ms timeout")

	// Other tools are not limited by slow's max_instances.
	echo := relCall(c, "demo_echo", map[string]any{"text": "unaffected"}, nil)
	assert.Equal(t, "unaffected", firstText(t, relResult(t, echo)))

	assert.Equal(t, "done after 15 steps", firstText(t, relResult(t, relAwait(t, running))))
	assert.Equal(t, "done after 1 steps", firstText(t, relResult(t,
		relCall(c, "demo_slow", map[string]any{"seconds": 0.01, "steps": 1}, nil))), "the slot is free again")
}
