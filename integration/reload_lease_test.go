package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReloadLeaseSettingsApplyLive: editing only a stateful server's lease
// settings restarts nothing. The session holding an instance keeps it, with
// its state, through every edit; a raised lease.max_instances lets in at once
// a session the old cap refused; a raised lease.prewarm starts a spare; a
// lowered cap stops that spare and refuses new leases, while every leased
// instance runs on. Each reload says what it applied.
func TestReloadLeaseSettingsApplyLive(t *testing.T) {
	t.Parallel()
	config := func(maxInstances, prewarm int) string {
		return leaseConfig(leaseBlock("counter", "counter", false,
			fmt.Sprintf("lease: {max_instances: %d, prewarm: %d, idle_ttl: 1h}", maxInstances, prewarm)))
	}
	r := newReloadRig(t, httpTransport, config(1, 0))
	holder := r.c
	assert.Equal(t, 1, leaseValue(t, holder, "counter_increment"))
	assert.Equal(t, 2, leaseValue(t, holder, "counter_increment"))
	pid := leasePID(t, holder, "counter_pid")
	kept := func(when string) {
		t.Helper()
		assert.Equal(t, pid, leasePID(t, holder, "counter_pid"), "%s: the session's instance was replaced", when)
		assert.Equal(t, 2, leaseValue(t, holder, "counter_get"), "%s: the session's state was lost", when)
		assert.Equal(t, pid, leaseHeld(t, holder, "counter"), "%s: mcp_status lists another lease", when)
	}

	other := r.a.connect()
	_, err := leaseTry(other, "counter_increment", nil)
	require.Error(t, err, "a second instance was started beyond max_instances: 1")
	assert.Contains(t, err.Error(), "lease.max_instances: 1")

	// Raise the cap and ask for a spare.
	r.save(config(3, 1))
	line := r.waitReload()
	assert.Contains(t, line, "changed=false")
	assert.Contains(t, line, `applied="counter: lease.max_instances 1 -> 3, lease.prewarm 0 -> 1"`)
	kept("after max_instances was raised")
	got := leaseCall(t, other, "counter_increment", nil)
	require.NotNil(t, got.Value)
	assert.Equal(t, 1, *got.Value, "the session refused before leases a clean instance now")
	otherPID := leasePID(t, other, "counter_pid")
	assert.NotEqual(t, pid, otherPID)
	leaseWaitSpares(t, holder, "counter", 1)
	st := leaseStatusOf(t, holder).Servers
	require.Len(t, st, 1)
	assert.Equal(t, 3, st[0].Instances, "two leased instances and the spare")
	assert.Equal(t, 2, st[0].Leased)

	// Lower the cap below what runs: the spare goes, the leases stay.
	r.save(config(1, 1))
	assert.Contains(t, r.waitReload(), `applied="counter: lease.max_instances 3 -> 1"`)
	leaseWaitSpares(t, holder, "counter", 0)
	kept("after max_instances was lowered")
	assert.Equal(t, otherPID, leasePID(t, other, "counter_pid"), "the other session's instance was replaced")
	assert.ElementsMatch(t, []int{pid, otherPID}, leaseCounterProcesses(t, r.a), "only the leased instances run")
	third := r.a.connect()
	_, err = leaseTry(third, "counter_increment", nil)
	require.Error(t, err, "a new lease was given beyond the lowered max_instances")
	assert.Contains(t, err.Error(), "lease.max_instances: 1")

	for _, kind := range []string{"released", "session-ended", "expired", "lost", "recycled"} {
		assert.Empty(t, leaseEvents(r.a, kind, "counter"), "no lease ended: %s", kind)
	}
	assert.Equal(t, 1, strings.Count(r.a.log.String(), `msg="server ready" server=counter `), "the server was started again")
}
