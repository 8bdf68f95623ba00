package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRateLimitsPerPrincipal: each principal has its own buckets, per
// server and overall; a call over a limit gets a JSON-RPC error saying
// when to retry and which limit it hit, and another principal is not
// slowed by it. The audit log records the refusal.
func TestRateLimitsPerPrincipal(t *testing.T) {
	t.Parallel()
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	alice, bob := randomToken(t), randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, fmt.Sprintf(`version: 1
http:
  auth:
    tokens:
      alice: { env: ALICE_TOKEN }
      bob: { env: BOB_TOKEN }
audit: {to: %q}
rate_limits:
  calls: {per_second: 0.001, burst: 3}
  servers:
    counter: {per_second: 0.001, burst: 1}
servers:
  demo:
    truely-stateless: true
    %s
    transform: [{prefix: demo_}]
  counter:
    %s
    transform: [{prefix: counter_}]
`, auditPath, demoServer("tools"), demoServer("counter")))}, env: []string{"ALICE_TOKEN=" + alice, "BOB_TOKEN=" + bob}})
	a.waitLoaded()
	ac, bc := a.connectAs(alice), a.connectAs(bob)

	refused := func(resp *response, limit string) {
		t.Helper()
		require.NotNil(t, resp.Error, "the call is over %s", limit)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				RetryAfter float64 `json:"retryAfterSeconds"`
				Limit      string  `json:"limit"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(resp.Error, &e), "%s", resp.Error)
		assert.Equal(t, -32029, e.Code)
		assert.Equal(t, limit, e.Data.Limit)
		assert.Greater(t, e.Data.RetryAfter, 0.0)
		assert.Contains(t, e.Message, "retry after")
	}
	ac.callToolResult("counter_increment", map[string]any{})
	refused(ac.callTool("counter_increment", map[string]any{}), "rate_limits.servers.counter")
	ac.callToolResult("demo_echo", map[string]any{"text": "a"})
	ac.callToolResult("demo_echo", map[string]any{"text": "b"})
	refused(ac.callTool("demo_echo", map[string]any{"text": "c"}), "rate_limits.calls")

	bc.callToolResult("counter_increment", map[string]any{})
	bc.callToolResult("demo_echo", map[string]any{"text": "bob is not slowed by alice"})

	// A sessionless call names its tool in headers: over the limit, it is
	// refused with 429 and Retry-After before its body is read.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := modernPostAs(ctx, a.url, alice, "tools/call", "demo_echo",
		map[string]any{"name": "demo_echo", "arguments": map[string]any{"text": "d"}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	assert.Greater(t, secs, 0)
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &msg), "%s", body)
	assert.Equal(t, -32029, msg.Error.Code)
	assert.Contains(t, msg.Error.Message, "retry after")
	modernCallAs(t, a.url, bob, "demo_pid", "") // bob's sessionless calls pass

	lines := auditLines(t, auditPath, 7)
	var denied []string
	for _, l := range lines {
		if l["outcome"] == "denied" {
			denied = append(denied, orEmpty(l["rule"]))
		}
	}
	assert.Equal(t, []string{"rate_limits.servers.counter", "rate_limits.calls"}, denied)
}
