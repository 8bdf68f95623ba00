package integration

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// sharedPIDOf returns the pid of server's shared instance per mcp_status.
func sharedPIDOf(t *testing.T, c *client, server string) int {
	t.Helper()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(c.callToolResult("mcp_status", map[string]any{}), &res))
	require.NotEmpty(t, res.Content)
	var st struct {
		Servers []struct {
			ID  string `json:"id"`
			PID int    `json:"pid"`
		} `json:"servers"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &st))
	for _, s := range st.Servers {
		if s.ID == server && s.PID != 0 {
			return s.PID
		}
	}
	t.Fatalf("mcp_status shows no running shared instance of %q: %s", server, res.Content[0].Text)
	return 0
}

// TestSubscriptionFollowsNewSharedInstance: a client subscribed to a
// resource of a shared server through the aggregator. When another
// instance takes the server over, because a reload changed the server or
// because the instance crashed and was restarted, the new instance is
// subscribed too: the client's updates do not stop without a word.
func TestSubscriptionFollowsNewSharedInstance(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		const uri = "demo://r/1"
		r := newReloadRig(t, tr, sharedSurfaceConfig("one"))
		resp := r.c.mustRequest("resources/subscribe", map[string]any{"uri": uri})
		require.Empty(t, string(resp.Error))
		_, ok := updatedAfter(r.c, 0, uri)
		require.True(t, ok, "the first instance answered the subscription with an update")

		// A reload that changes the server: a new instance.
		old := sharedPIDOf(t, r.c, "surf")
		seen := len(r.c.inboxNotes())
		r.save(sharedSurfaceConfig("two"))
		r.waitReload()
		_, ok = updatedAfter(r.c, seen, uri)
		require.True(t, ok, "the instance the reload started was never subscribed")
		restarted := sharedPIDOf(t, r.c, "surf")
		require.NotEqual(t, old, restarted)

		// A crash: the instance is restarted.
		seen = len(r.c.inboxNotes())
		require.NoError(t, syscall.Kill(restarted, syscall.SIGKILL))
		_, ok = updatedAfter(r.c, seen, uri)
		require.True(t, ok, "the instance restarted after the crash was never subscribed")
		require.NotEqual(t, restarted, sharedPIDOf(t, r.c, "surf"))
	})
}

// leasedSurfaceConfig fronts one leased demo surface server: each session
// has its own instance, which answers a resources/subscribe and then at
// once sends notifications/resources/updated for the URI.
func leasedSurfaceConfig(mark string) string {
	return fmt.Sprintf(`version: 1
servers:
  surf:
    %s
    env: {MARK: %q}
`, demoServer("surface"), mark)
}

// TestSubscriptionFollowsNewLeasedInstance: a session subscribed to a
// resource of a server it leases. When its instance crashes, or a reload
// changes the server, the session's next request runs on a new instance,
// which is subscribed to what the session subscribed to before the request
// reaches it: the update the new instance sends for the URI arrives.
func TestSubscriptionFollowsNewLeasedInstance(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		const uri, other = "demo://r/1", "demo://r/2"
		r := newReloadRig(t, tr, leasedSurfaceConfig("one"))
		resp := r.c.mustRequest("resources/subscribe", map[string]any{"uri": uri})
		require.Empty(t, string(resp.Error))
		_, ok := updatedAfter(r.c, 0, uri)
		require.True(t, ok, "the first instance answered the subscription with an update")

		// A crash: the session's next request gets a fresh instance.
		first := leaseHeld(t, r.c, "surf")
		require.NotZero(t, first, "the session leases an instance of surf")
		require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
		relLogLine(t, r.a, relRecoverTimeout, `msg="upstream exited"`, "server=surf")
		seen := len(r.c.inboxNotes())
		resp = r.c.mustRequest("resources/read", map[string]any{"uri": other})
		require.Empty(t, string(resp.Error))
		_, ok = updatedAfter(r.c, seen, uri)
		require.True(t, ok, "the instance that replaced the crashed one was never subscribed")
		second := leaseHeld(t, r.c, "surf")
		require.NotZero(t, second)
		require.NotEqual(t, first, second)

		// A reload that changes the server: a new instance again.
		r.save(leasedSurfaceConfig("two"))
		r.waitReload()
		seen = len(r.c.inboxNotes())
		resp = r.c.mustRequest("resources/read", map[string]any{"uri": other})
		require.Empty(t, string(resp.Error))
		_, ok = updatedAfter(r.c, seen, uri)
		require.True(t, ok, "the instance the reload started was never subscribed")
		require.NotEqual(t, second, leaseHeld(t, r.c, "surf"))
	})
}
