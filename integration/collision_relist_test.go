package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relistConfig has two servers exporting a tool named env: first, which owns it and
// can take it out of its own tool list and put it back at run time (hide_tool,
// show_tool), and second, whose rich tool the transform renames env (the leading
// "rich" is removed, "env" added) and which is skipped while first holds the name.
func relistConfig() string {
	return `version: 1
servers:
  first:
    truely-stateless: true
    ` + demoServer("tools", "--mutable") + `
    env: {WHO: first}
    tools: {whitelist: [env, hide_tool, show_tool]}
  second:
    truely-stateless: true
    ` + demoServer("fidelity") + `
    tools: {whitelist: [rich]}
    transform: [{prefix: {remove: rich, add: env}}]
`
}

// secondEnv is second's rich tool as clients see it under the name env.
const secondEnv = `{"name":"env","title":"Rich result","description":"Returns a result containing every kind of content, including one this protocol revision does not define.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`

// TestCollisionNameFreedByUpstreamGoesToTheSkippedTool: when the owner's upstream
// stops listing a tool (list_changed, then a tools/list without it), the server that
// had to skip that name exports it at once, without a reload, and clients hear one
// tools/list_changed; the warning naming the old owner goes. When the old owner's
// upstream lists the tool again, the name stays with the server that now holds it,
// clients hear nothing, and the warning names the new owner.
func TestCollisionNameFreedByUpstreamGoesToTheSkippedTool(t *testing.T) {
	t.Parallel()
	r := newReloadRig(t, stdioTransport, relistConfig())
	listedEnv := func() string {
		for _, raw := range r.c.listTools() {
			var tool struct{ Name string }
			require.NoError(t, json.Unmarshal(raw, &tool))
			if tool.Name == "env" {
				return string(raw)
			}
		}
		return ""
	}
	callEnv := func() string { return firstText(t, r.c.callToolResult("env", map[string]any{"name": "WHO"})) }
	problems := func() []string {
		list, _ := status(t, r.c)["problems"].([]any)
		return stringsOf(list)
	}
	require.Equal(t, "first", callEnv())
	assert.True(t, anyContains(problems(), `"env" is already owned by "first"`), "%q", problems())

	assert.Equal(t, "hid env", firstText(t, r.c.callToolResult("hide_tool", map[string]any{"name": "env"})))
	r.expectNotified(1)
	assert.JSONEq(t, secondEnv, listedEnv(), "the freed name is exported by the server that skipped it")
	assert.Contains(t, callEnv(), "plain text", "the freed name reaches the server that skipped it")
	assert.False(t, anyContains(problems(), "already owned"), "no warning names the old owner: %q", problems())
	r.settle(relistConfig())
	assert.Equal(t, 1, r.listChanged(), "clients hear of the change once")

	assert.Equal(t, "showed env", firstText(t, r.c.callToolResult("show_tool", map[string]any{"name": "env"})))
	require.Eventually(t, func() bool { return anyContains(problems(), `"env" is already owned by "second"`) }, reloadWait, 50*time.Millisecond,
		"the old owner's env, listed again, is skipped with a warning naming the new owner")
	assert.JSONEq(t, secondEnv, listedEnv(), "the server that holds the name keeps it")
	assert.Contains(t, callEnv(), "plain text", "calls still reach the server that holds the name")
	r.settle(relistConfig())
	assert.Equal(t, 1, r.listChanged(), "the catalog did not change, so clients hear nothing")
}
