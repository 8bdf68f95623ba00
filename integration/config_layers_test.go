package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigLayersLaterFileReplacesServer: with several --config files, a server id
// defined again in a later file is that later definition as a whole (not a merge of
// the two), and the other servers of every file stay.
func TestConfigLayersLaterFileReplacesServer(t *testing.T) {
	t.Parallel()
	global := writeConfig(t, `version: 1
servers:
  shared:
    truely-stateless: true
    `+demoServer("tools")+`
    transform: [{prefix: global_}]
    tools: {whitelist: [echo, add]}
  other:
    truely-stateless: true
    `+demoServer("tools")+`
    transform: [{prefix: other_}]
    tools: {whitelist: [pid]}
`)
	project := writeConfig(t, `version: 1
servers:
  shared:
    truely-stateless: true
    `+demoServer("tools")+`
    tools: {whitelist: [echo]}
`)
	res := runCLI(t, "tools", "--json", "--config", global, "--config", project)
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	var out catalogOutput
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), "stdout: %s", res.stdout)
	assert.ElementsMatch(t, []catalogEntry{
		{"mcp_release", "mcp_admin", "mcp_release"},
		{"mcp_status", "mcp_admin", "mcp_status"},
		{"echo", "shared", "echo"},
		{"other_pid", "other", "pid"},
	}, out.Tools, "the project file's shared server replaces the global one, transform and filter included")
}
