package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReloadLeasedServerChangedThenRemoved: a reload that changes a leased server ends
// the session's lease once its call in flight has finished on the old instance (which
// then stops), and the session's next call leases a new instance; a reload that removes
// the server does the same, with no instance after it.
func TestReloadLeasedServerChangedThenRemoved(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		leased := func(gen string) string {
			return leaseConfig(leaseBlock("w", "tools", false, "tools: {whitelist: [slow, pid]}", `env: {GEN: "`+gen+`"}`))
		}
		r := newReloadRig(t, tr, leased("1"))
		first := leasePID(t, r.c, "w_pid")

		// slowCall starts a call on the session's instance and returns once it runs there.
		slowCall := func(token string) <-chan relOutcome {
			call := relStartCall(r.c, "w_slow", map[string]any{"seconds": 1.5, "steps": 3}, map[string]any{"progressToken": token})
			_, ok := r.c.waitNotification(func(n notification) bool {
				return n.Method == "notifications/progress" && containsAll(string(n.Params), `"`+token+`"`)
			}, reloadWait)
			require.True(t, ok, "no progress from the slow call")
			return call
		}

		call := slowCall("changed")
		r.save(leased("2"))
		r.waitReload()
		assert.Equal(t, []string{"done after 3 steps"}, relTexts(t, relResult(t, relAwait(t, call)))[:1],
			"the call in flight finishes on the changed server's old instance")
		waitGone(t, first)
		second := leasePID(t, r.c, "w_pid")
		assert.NotEqual(t, first, second, "the session's next call leases an instance of the new definition")

		call = slowCall("removed")
		r.save(leaseConfig(leaseBlock("other", "counter", true)))
		r.waitReload()
		assert.Equal(t, []string{"done after 3 steps"}, relTexts(t, relResult(t, relAwait(t, call)))[:1],
			"the call in flight finishes on the removed server's instance")
		waitGone(t, second)
		assert.NotContains(t, r.names(), "w_pid", "the removed server takes no new calls")
	})
}
