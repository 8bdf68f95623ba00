package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// demoToolNames are the tools of the demo server "tools".
var demoToolNames = []string{"echo", "add", "pid", "big", "slow", "fail", "env"}

// collisionOrderConfig has two servers exporting the same tools, unprefixed.
// The first in the config, zz, starts two seconds late, so aa, after it in
// the config (and before it alphabetically), is always ready first. Each
// reports its own id through the env tool.
func collisionOrderConfig() string {
	return `version: 1
servers:
  zz:
    truely-stateless: true
    command: /bin/sh
    args: ["-c", "sleep 2; exec \"$0\" demo-server tools", ` + quoted(binary) + `]
    env: {WHO: zz}
    connect_timeout: 20s
  aa:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {WHO: aa}
`
}

// assertCollisionWarnings checks that each demo tool of aa is reported as
// skipped because zz keeps its name, and that nothing says aa owns one.
func assertCollisionWarnings(t *testing.T, problems []string) {
	t.Helper()
	for _, name := range demoToolNames {
		assert.True(t, anyContains(problems, `"`+name+`" is already owned by "zz"`, `from server "aa" is skipped`),
			"a warning names zz as the owner of %s and aa as skipped: %q", name, problems)
	}
	assert.False(t, anyContains(problems, `already owned by "aa"`), "aa owns nothing: %q", problems)
}

// TestCollisionFreshStartFollowsConfigOrder: on a fresh start, a name two
// servers export goes to the one first in the config file, even when the
// other finishes starting first.
func TestCollisionFreshStartFollowsConfigOrder(t *testing.T) {
	t.Parallel()

	t.Run("tools command", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "tools", "--json", "--config", writeConfig(t, collisionOrderConfig()))
		var out catalogOutput
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), "stdout: %s; stderr: %s", res.stdout, res.stderr)
		owners := map[string]string{}
		for _, e := range out.Tools {
			owners[e.Name] = e.Server
		}
		for _, name := range demoToolNames {
			assert.Equal(t, "zz", owners[name], "%s belongs to the server first in the config; tools: %v", name, out.Tools)
		}
		assertCollisionWarnings(t, out.Problems)
	})

	t.Run("served", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, stdioTransport, collisionOrderConfig())
		a.waitLoaded()
		c := a.connect()
		names := toolNames(t, c.listTools())
		for _, name := range demoToolNames {
			assert.Equal(t, 1, countOf(names, name), "%s is listed once: %v", name, names)
		}
		assert.Equal(t, "zz", firstText(t, c.callToolResult("env", map[string]any{"name": "WHO"})),
			"a call of the shared name reaches the server that owns it")
		problems, _ := status(t, c)["problems"].([]any)
		assertCollisionWarnings(t, stringsOf(problems))
	})
}

func countOf(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}
