package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adminNameConfig has one server whose echo tool is exported as mcp_status, the
// name of an admin tool, with the admin tools on or off.
func adminNameConfig(adminOn bool) string {
	admin := "false"
	if adminOn {
		admin = "true"
	}
	return `version: 1
admin: {enabled: ` + admin + `}
servers:
  echoer:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: {remove: echo, add: mcp_status}}]
`
}

// TestCollisionAdminNameFreeWhileAdminToolsAreOff: with admin.enabled false the
// admin tools' names belong to nobody, so an upstream tool may be exported under
// one; when a reload turns the admin tools on the name goes back to them (the
// upstream tool is skipped with a warning naming mcp_admin), and when a reload
// turns them off again the upstream tool takes it back, its server keeping its
// process throughout.
func TestCollisionAdminNameFreeWhileAdminToolsAreOff(t *testing.T) {
	t.Parallel()
	r := newReloadRig(t, stdioTransport, adminNameConfig(false))
	assert.False(t, r.a.log.containsLine("mcp_admin"), "no warning names mcp_admin; stderr:\n%s", r.a.log)
	names := r.names()
	assert.Contains(t, names, "mcp_status", "the upstream tool is exported under the free name")
	assert.NotContains(t, names, "mcp_release", "the admin tools are off")
	assert.Equal(t, "mine", firstText(t, r.c.callToolResult("mcp_status", map[string]any{"text": "mine"})),
		"the name reaches the upstream tool")
	pid := firstText(t, r.c.callToolResult("mcp_statuspid", map[string]any{}))

	r.save(adminNameConfig(true))
	r.waitReload()
	r.expectNotified(1)
	names = r.names()
	assert.Equal(t, 1, countOf(names, "mcp_status"), "one tool per name: %q", names)
	assert.Contains(t, names, "mcp_release")
	st := status(t, r.c) // the admin tool answers now
	servers, _ := st["servers"].([]any)
	require.Len(t, servers, 1, "mcp_status: %v", st)
	problems, _ := st["problems"].([]any)
	assert.True(t, anyContains(stringsOf(problems), `"mcp_status" is already owned by "mcp_admin"`), "%q", problems)
	assert.True(t, anyContains(stringsOf(problems), "the aggregator's own tools keep their names"), "the fix offered is one that can be made: %q", problems)
	assert.False(t, anyContains(stringsOf(problems), "to one of them"), "the admin tool cannot be renamed: %q", problems)

	r.save(adminNameConfig(false))
	r.waitReload()
	r.expectNotified(2)
	assert.Equal(t, "back", firstText(t, r.c.callToolResult("mcp_status", map[string]any{"text": "back"})),
		"the freed name goes back to the upstream tool")
	assert.Equal(t, pid, firstText(t, r.c.callToolResult("mcp_statuspid", map[string]any{})), "echoer keeps its process")
}
