package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListChangedAppliedWhileAnotherServerStarts: hang never answers
// initialize (connect_timeout two minutes); meanwhile fidelity, already
// serving, adds a tool and says so, and the client hears of it and lists
// it. Then the client goes, and the aggregator exits at once rather than
// once hang's start is over.
func TestListChangedAppliedWhileAnotherServerStarts(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, fmt.Sprintf(`version: 1
servers:
  fidelity:
    truely-stateless: true
    %s
  hang:
    truely-stateless: true
    connect_timeout: 120s
    %s
`, demoServer("fidelity"), demoServer("misbehave", "hang-init")))
	c := a.connect()
	_, ok := a.log.waitLine(func(line string) bool { return containsAll(line, `msg="server ready"`, "server=fidelity") }, startTimeout, a.exited)
	require.True(t, ok, "fidelity never started; stderr:\n%s", a.log)
	require.Contains(t, toolNames(t, c.listTools()), "add_tool")

	before, _ := c.inbox.snapshot()
	assert.Contains(t, firstText(t, c.callToolResult("add_tool", map[string]any{})), "added added_1")
	deadline := time.After(20 * time.Second)
	for heard := false; !heard; {
		notes, changed := c.inbox.snapshot()
		for _, n := range notes[len(before):] {
			heard = heard || n.Method == "notifications/tools/list_changed"
		}
		if !heard {
			select {
			case <-changed:
			case <-deadline:
				t.Fatal("no tools/list_changed while hang starts")
			}
		}
	}
	require.Contains(t, toolNames(t, c.listTools()), "added_1", "the new tool is listed while hang starts")
	require.False(t, a.loaded(), "hang's start is still under way")

	require.NoError(t, a.stdin.Close())
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the aggregator waited for hang's start to stop")
	}
}
