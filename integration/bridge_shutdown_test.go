package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBridgeHeldRequestEndsAtShutdown: a 2026-07-28 request whose upstream
// asked for input is held for the client's retry. When the aggregator stops
// (stdio: its client leaves; HTTP: SIGTERM), no retry can reach it any
// more: the held request and its upstream call end at once, and shutdown
// does not wait out its grace for them.
func TestBridgeHeldRequestEndsAtShutdown(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, fmt.Sprintf(`version: 1
servers:
  surface:
    truely-stateless: true
    %s
    transform: [{prefix: s_}]
`, demoServer("surface")))
		a.waitLoaded()
		meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
		var result map[string]any
		switch tr {
		case stdioTransport:
			resp := a.newClient().mustRequest("tools/call", map[string]any{"name": "s_ask", "arguments": map[string]any{},
				"_meta": decodeObject(t, []byte(meta))})
			require.Empty(t, string(resp.Error))
			result = decodeObject(t, resp.Result)
		case httpTransport:
			r := modernRaw(t, a.url, "tools/call", "s_ask",
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s_ask","arguments":{},"_meta":`+meta+`}}`, nil)
			m := coreMessage(t, r)
			require.Empty(t, string(m.Error))
			result = decodeObject(t, m.Result)
		}
		require.Equal(t, "input_required", result["resultType"], "the upstream asks for sampling: %v", result)

		start := time.Now()
		switch tr {
		case stdioTransport:
			require.NoError(t, a.stdin.Close())
		case httpTransport:
			require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
		}
		select {
		case <-a.exited:
		case <-time.After(stopTimeout):
			t.Fatalf("the aggregator did not exit within %s", stopTimeout)
		}
		took := time.Since(start)
		assert.Less(t, took, 4*time.Second, "the aggregator waited for a held request no retry can reach; log:\n%s", a.log)
	})
}
