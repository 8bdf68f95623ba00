package demo

import (
	"testing"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigLoads: the demo config is a valid config of two servers, each run by the
// binary it names, whatever that binary's path holds (spaces, quotes, a $ that would
// otherwise start a variable).
func TestConfigLoads(t *testing.T) {
	for _, exe := range []string{
		"/usr/local/bin/mcp-aggregator",
		`/home/a user/bin/"mcp" aggregator`,
		"/opt/$HOME/mcp-aggregator",
		`C:\Program Files\mcp-aggregator.exe`,
	} {
		t.Run(exe, func(t *testing.T) {
			ws, problems := config.LoadBytes("(built-in demo config)", Config(exe), func(string) (string, bool) { return "", false })
			require.Empty(t, problems)
			require.Len(t, ws.Servers, 2)

			tools, counter := ws.Servers[0], ws.Servers[1]
			assert.Equal(t, "demo", tools.ID)
			assert.True(t, tools.Stateless, "the toolbox is shared by every session")
			assert.Equal(t, exe, tools.Command)
			assert.Equal(t, []string{"demo-server", "tools", "--env", "DEMO_GREETING"}, tools.Args)
			assert.Equal(t, map[string]string{"DEMO_GREETING": "hello from the built-in demo config"}, tools.Env)
			require.Len(t, tools.Transforms, 1)
			assert.Equal(t, "demo_", tools.Transforms[0].Add)

			assert.Equal(t, "counter", counter.ID)
			assert.False(t, counter.Stateless, "the counter is leased per session")
			assert.Equal(t, exe, counter.Command)
			assert.Equal(t, []string{"demo-server", "counter"}, counter.Args)
			assert.Equal(t, 30*time.Minute, counter.Lease.IdleTTL)
			assert.Equal(t, 1, counter.Lease.Prewarm)
		})
	}
}

// TestConfigNamesRunnableServers: every server the demo config runs is one Run knows.
func TestConfigNamesRunnableServers(t *testing.T) {
	ws, problems := config.LoadBytes("demo.yaml", Config("/bin/mcp-aggregator"), func(string) (string, bool) { return "", false })
	require.Empty(t, problems)
	for _, s := range ws.Servers {
		require.GreaterOrEqual(t, len(s.Args), 2, s.ID)
		assert.Equal(t, "demo-server", s.Args[0])
		assert.Contains(t, Names(), s.Args[1], s.ID)
	}
}
