package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiscoveryReloadFindsNewServer edits the config to add a server while
// clients are connected in search mode: its tools are found at once,
// without a restart, and clients hear tools/list_changed.
func TestDiscoveryReloadFindsNewServer(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		r := newReloadRig(t, tr, discoveryConfig(t, dir, false))
		before := foundNames(searchTools(t, r.c, "create entities in the knowledge graph"))
		assert.NotContains(t, before, "memory_create_entities")

		r.save(discoveryConfig(t, dir, true))
		assert.Contains(t, discoveryWaitReload(r), "changed=true")
		r.expectNotified(1)
		found := searchTools(t, r.c, "create entities in the knowledge graph")
		require.NotEmpty(t, found)
		assert.Equal(t, "memory_create_entities", found[0].Name)
		assert.Equal(t, "memory", found[0].Server)
		assert.Equal(t, []string{"mcp_release", "mcp_status", "mcp_search_tools", "mcp_call_tool", "fs_read_text_file"}, r.names(),
			"tools/list stays short")

		// The config edit that removes it makes it unfindable again.
		r.save(discoveryConfig(t, dir, false))
		assert.Contains(t, discoveryWaitReload(r), "changed=true")
		assert.NotContains(t, foundNames(searchTools(t, r.c, "create entities in the knowledge graph")), "memory_create_entities")
	})
}

// nodeStartWait bounds a reload that starts a Node.js server: on a busy
// two-core machine node takes seconds to load a server, more than the
// reloadWait of the demo servers.
const nodeStartWait = 90 * time.Second

// discoveryWaitReload is reloadRig.waitReload with room for a Node.js start.
func discoveryWaitReload(r *reloadRig) string {
	r.t.Helper()
	return r.waitReloadWithin(nodeStartWait)
}
