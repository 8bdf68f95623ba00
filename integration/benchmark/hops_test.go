package benchmark

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
)

// TestReferenceHops checks the stdio hops BenchmarkCall measures the
// aggregator against: each passes the echo upstream's answers on unchanged,
// with 16 calls in flight, and leaves no process behind once its client has
// gone.
func TestReferenceHops(t *testing.T) {
	exe, args, env := helper(t, "echo", "stdio")
	params := callParams("echo", echoText)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	direct := dialStdio(t, newStderrLog(), env, exe, args...)
	want, err := direct.request(ctx, "tools/call", params)
	require.NoError(t, err)
	for _, role := range []string{"relay", "parser", "transports"} {
		t.Run(role, func(t *testing.T) {
			var hop, upstream int
			t.Run("calls", func(t *testing.T) {
				c := dialStdio(t, newStderrLog(), env, exe, append([]string{role, exe}, args...)...)
				hop = c.pid
				var err error
				upstream, err = childRunning(hop, "echo")
				require.NoError(t, err)
				got, err := c.request(ctx, "tools/call", params)
				require.NoError(t, err)
				require.JSONEq(t, string(want), string(got))
				_, err = sendRequests(c, 64, 16, "tools/call", params)
				require.NoError(t, err)
				// An error of the upstream's comes back as the upstream gave it.
				_, err = c.request(ctx, "no/such/method", json.RawMessage(`{}`))
				require.ErrorContains(t, err, "method not found")
			}) // the client is closed as the subtest ends
			testproc.RequireReaped(t, hop)
			testproc.RequireGone(t, upstream)
		})
	}
}
