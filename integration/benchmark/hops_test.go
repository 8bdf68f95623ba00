package benchmark

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// TestReferenceHops checks the hops in front of a stdio upstream that
// BenchmarkCall measures the aggregator against: each passes the echo
// upstream's answers on unchanged, with 16 calls in flight, and leaves no
// process behind once it is told to end (over stdio, by its client going
// away; over HTTP, by SIGTERM).
func TestReferenceHops(t *testing.T) {
	exe, args, env := helper(t, "echo", "stdio")
	params := callParams("echo", echoText)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	direct := dialStdio(t, newStderrLog(), env, exe, args...)
	want, err := direct.request(ctx, "tools/call", params)
	require.NoError(t, err)
	client := newHTTPClient()
	for _, hop := range []struct {
		role string
		http bool
	}{
		{"relay", false}, {"parser", false}, {"transports", false},
		{"bridge", true}, {"router", true}, {"httptransports", true},
	} {
		t.Run(hop.role, func(t *testing.T) {
			var hopPID, upstream int
			t.Run("calls", func(t *testing.T) {
				argv := append([]string{hop.role, exe}, args...)
				var c *conn
				if hop.http {
					p := startHTTPProcess(t, env, exe, argv...)
					hopPID, c = p.cmd.Process.Pid, dialHTTP(t, client, p.url)
				} else {
					c = dialStdio(t, newStderrLog(), env, exe, argv...)
					hopPID = c.pid
				}
				var err error
				upstream, err = childRunning(hopPID, "echo")
				require.NoError(t, err)
				got, err := c.request(ctx, "tools/call", params)
				require.NoError(t, err)
				require.JSONEq(t, string(want), string(got))
				_, err = sendRequests(c, 64, 16, "tools/call", params)
				require.NoError(t, err)
				// An error of the upstream's comes back as the upstream gave it.
				_, err = c.request(ctx, "no/such/method", json.RawMessage(`{}`))
				require.ErrorContains(t, err, "method not found")
			}) // the hop is told to end as the subtest ends
			testproc.RequireReaped(t, hopPID)
			testproc.RequireGone(t, upstream)
		})
	}
}
