package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChurnShutdownAbandonsASpareThatIsStarting: a stateful server keeps a
// spare ready (lease.prewarm); when a session leases the spare, the next one
// starts in the background. An aggregator stopped while that start hangs
// does not wait for the server's connect_timeout: the start is abandoned,
// its process stopped, and the aggregator exits within its shutdown grace
// (stop asserts the exit and that no process survived).
func TestChurnShutdownAbandonsASpareThatIsStarting(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		flag := filepath.Join(dir, "hang")
		// Instances start normally until the flag file exists; then they
		// say so and never answer initialize.
		script := "if [ -e " + flag + " ]; then echo hanging >&2; exec " + binary + " demo-server misbehave hang-init; fi; exec " + binary + " demo-server counter"
		config := `version: 1
servers:
  c:
    command: sh
    args: ["-c", ` + quoted(script) + `]
    transform: [{prefix: c_}]
    connect_timeout: 10m
    lease: {prewarm: 1}
`
		a := serveConfig(t, tr, config)
		a.waitLoaded()
		require.NoError(t, os.WriteFile(flag, nil, 0o644))
		// Stopped once the client's session is closed (cleanups run last
		// first).
		var hung bool
		t.Cleanup(func() {
			if !hung {
				return
			}
			start := time.Now()
			a.stop()
			assert.Less(t, time.Since(start), 15*time.Second, "the aggregator waited for a spare's start to stop")
		})
		c := a.newClient()
		c.initialize()
		c.callToolResult("c_increment", map[string]any{})
		_, ok := a.log.waitLine(func(line string) bool {
			return strings.Contains(line, `msg="upstream stderr"`) && strings.Contains(line, "server=c") && strings.Contains(line, "hanging")
		}, startTimeout, a.exited)
		require.True(t, ok, "the next spare never started; stderr:\n%s", a.log)
		hung = true
	})
}
