package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowSurfaceConfig fronts the demo server "surface" (resources with
// subscriptions, prompts, completions, logging), started a second late, as
// a server that takes its time to come up would be.
func slowSurfaceConfig() string {
	return `version: 1
servers:
  surface:
    truely-stateless: true
    command: sh
    args: ["-c", "sleep 1; exec \"$0\" demo-server surface", ` + quoted(binary) + `]
`
}

// requireSurfaceCaps asserts that capabilities (a raw capabilities object)
// offer what the surface server has.
func requireSurfaceCaps(t *testing.T, raw json.RawMessage, what string) {
	t.Helper()
	var caps map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &caps), "%s: %s", what, raw)
	for _, k := range []string{"tools", "resources", "prompts", "completions", "logging"} {
		assert.Contains(t, caps, k, "%s offers %s: %s", what, k, raw)
	}
	var resources struct {
		Subscribe bool `json:"subscribe"`
	}
	if res, ok := caps["resources"]; ok {
		require.NoError(t, json.Unmarshal(res, &resources))
		assert.True(t, resources.Subscribe, "%s offers resources.subscribe: %s", what, raw)
	}
}

// TestCapabilitiesEarlyInitialize: an initialize sent the moment the
// aggregator starts, as IDEs send it, waits for the first load (within its
// bound) and offers what a server that starts a second late has.
func TestCapabilitiesEarlyInitialize(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, slowSurfaceConfig())
		c := a.newClient()
		start := time.Now()
		init := c.initializeWith(map[string]any{})
		took := time.Since(start)
		var res struct {
			Capabilities json.RawMessage `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(init, &res))
		requireSurfaceCaps(t, res.Capabilities, "an early initialize")
		assert.Less(t, took, 10*time.Second, "initialize waits for the first load within its bound")

		// What was offered is usable.
		resp := c.mustRequest("prompts/list", map[string]any{})
		assert.Empty(t, string(resp.Error), "prompts/list")
		resp = c.mustRequest("resources/list", map[string]any{})
		assert.Empty(t, string(resp.Error), "resources/list")
	})
}

// TestCapabilitiesEarlyDiscover: server/discover (2026-07-28) sent the
// moment the aggregator starts likewise offers the slow server's surface.
func TestCapabilitiesEarlyDiscover(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, slowSurfaceConfig())
	ctx := t.Context()
	resp, err := modernPost(ctx, a.url, "server/discover", "", map[string]any{})
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var msg struct {
		Result struct {
			Capabilities json.RawMessage `json:"capabilities"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &msg), "%s", body)
	require.Empty(t, msg.Error, "%s", body)
	requireSurfaceCaps(t, msg.Result.Capabilities, "an early server/discover")
}

// TestCapabilitiesNoListChangedUnoffered: a session that was not offered
// resources and prompts at its initialize (no server had them) is not told
// that their lists changed when a server that has them arrives; it is told
// of the tools that came with it.
func TestCapabilitiesNoListChangedUnoffered(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		config := func(extra string) string {
			return fmt.Sprintf("version: 1\nservers:\n  demo:\n    truely-stateless: true\n    %s\n    transform: [{prefix: demo_}]\n%s",
				demoServer("tools"), extra)
		}
		r := newReloadRig(t, tr, config(""))
		// Not offered at initialize (newReloadRig initialized after the load).
		names := toolNames(t, r.c.listTools())
		require.Contains(t, names, "demo_echo")

		r.save(config("  surface:\n    truely-stateless: true\n    " + demoServer("surface") + "\n    transform: [{prefix: s_}]\n"))
		assert.Contains(t, r.waitReload(), "changed=true")
		_, ok := r.c.waitNotification(func(n notification) bool {
			return n.Method == "notifications/tools/list_changed"
		}, reloadWait)
		require.True(t, ok, "tools/list_changed for the new server's tools; log:\n%s", r.a.log)
		// A request answered after the commit: anything the commit sent
		// the session is in by now.
		require.Empty(t, r.c.mustRequest("ping", map[string]any{}).Error)
		notes, _ := r.c.inbox.snapshot()
		for _, n := range notes {
			assert.NotEqual(t, "notifications/resources/list_changed", n.Method, "resources were not offered to this session")
			assert.NotEqual(t, "notifications/prompts/list_changed", n.Method, "prompts were not offered to this session")
		}
	})
}

// TestCapabilitiesEarlyTasks: an initialize answered while server-everything,
// which declares tasks, is still starting offers tasks as it does. Tasks are
// negotiated at initialize only, and a client MUST NOT call a tool as a task
// unless tasks.requests.tools.call was offered, so without it the session
// could never use the tool that requires a task.
func TestCapabilitiesEarlyTasks(t *testing.T) {
	entry := nodeEntry(t, everythingEntry)
	direct := connectDirect(t, nil, "node", entry, "stdio")
	var want struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(direct.initializeWith(map[string]any{}), &want))
	require.Contains(t, want.Capabilities, "tasks", "server-everything declares tasks")

	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, `version: 1
servers:
  every:
    truely-stateless: true
    command: sh
    args: ["-c", "sleep 1; exec node \"$0\" stdio", `+quoted(entry)+`]
    tools: {whitelist: [simulate-research-query]}
`)
		c := a.newClient()
		var got struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(c.initializeWith(map[string]any{}), &got))
		if assert.Contains(t, got.Capabilities, "tasks", "an early initialize offers tasks: %v", got.Capabilities) {
			assertJSONEqual(t, want.Capabilities["tasks"], got.Capabilities["tasks"])
		}

		// What was offered is usable: the tool that requires a task runs as one.
		// A call waits for the first load only so long (firstListWait), and the
		// server takes a second and more to start, so wait for its tool first.
		require.True(t, waitForTool(c, "simulate-research-query", startTimeout), "the server's tool was never listed")
		task := startTask(t, c, "simulate-research-query", map[string]any{"topic": "aggregators", "ambiguous": false})
		assert.NotEmpty(t, task.TaskID)
		assert.Contains(t, listTasks(t, c), task.TaskID)
	})
}
