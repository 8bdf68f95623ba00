package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// freedConfig has two servers exporting echo unprefixed: first, which owns it (its
// whitelist says which of its tools it exports), and second, whose echo is skipped
// while first holds the name.
func freedConfig(withFirst bool, firstTools string) string {
	config := "version: 1\nservers:\n"
	if withFirst {
		config += `  first:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {WHO: first}
    tools: {whitelist: [` + firstTools + `]}
`
	}
	return config + `  second:
    truely-stateless: true
    ` + demoServer("tools") + `
    env: {WHO: second}
    tools: {whitelist: [echo, env]}
`
}

// TestCollisionFreedNameGoesToTheSkippedTool: a tool skipped because another server
// owned its name is exported as soon as a reload frees the name, whether the owner
// is removed or only stops exporting it; the server that had to skip it is unchanged
// and keeps its process, and no warning names the old owner any more.
func TestCollisionFreedNameGoesToTheSkippedTool(t *testing.T) {
	for _, tc := range []struct {
		name  string
		freed string // the config that frees echo
	}{
		{"owner removed", freedConfig(false, "")},
		{"owner stops exporting it", freedConfig(true, "pid, add")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newReloadRig(t, stdioTransport, freedConfig(true, "echo, env, pid"))
			assert.Equal(t, "first", firstText(t, r.c.callToolResult("env", map[string]any{"name": "WHO"})))
			secondPID := func() string {
				instances, _ := status(t, r.c)["instances"].([]any)
				for _, in := range instances {
					if m, _ := in.(map[string]any); m["serverId"] == "second" {
						return fmt.Sprint(m["pid"])
					}
				}
				return ""
			}
			pid := secondPID()
			assert.NotEmpty(t, pid, "mcp_status names the shared instance of second")
			before := status(t, r.c)["problems"]
			assert.True(t, anyContains(stringsOf(before.([]any)), `"echo" is already owned by "first"`), "%v", before)

			r.save(tc.freed)
			r.waitReload()
			r.expectNotified(1)
			assert.Contains(t, r.names(), "echo", "the freed name is exported by the server that skipped it")
			assert.Equal(t, "second", firstText(t, r.c.callToolResult("env", map[string]any{"name": "WHO"})),
				"the freed name reaches the server that skipped it")
			assert.Equal(t, pid, secondPID(), "second keeps its process")
			problems, _ := status(t, r.c)["problems"].([]any)
			assert.False(t, anyContains(stringsOf(problems), "already owned"), "no warning names an owner any more: %q", problems)
		})
	}
}
