package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReloadLeaseSettingsApplyLive: editing only a stateful server's lease
// settings restarts nothing. The session holding an instance keeps it, with
// its state, through every edit; a raised lease.max_instances lets in at once
// a session the old cap kept waiting (for the holder's lease to turn
// reclaimable, 10s after its last call); a raised lease.prewarm starts a
// spare; a lowered cap stops that spare and gives no new lease over it, while
// every leased instance runs on. Each reload says what it applied.
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
	asked := time.Now()
	waiting := relStartCall(other, "counter_increment", map[string]any{}, nil)
	leaseWaitWaiting(t, holder, "counter", 1) // the call reaches the cap and waits there
	select {
	case o := <-waiting:
		t.Fatalf("a second instance was started beyond max_instances: 1, or the session was refused while the holder's lease was quiet: %+v", o)
	default:
	}

	// Raise the cap and ask for a spare.
	r.save(config(3, 1))
	line := r.waitReload()
	assert.Contains(t, line, "changed=false")
	assert.Contains(t, line, `applied="counter: lease.max_instances 1 -> 3, lease.prewarm 0 -> 1"`)
	got, err := leaseDecode(relResult(t, relAwait(t, waiting)))
	require.NoError(t, err)
	assert.Less(t, time.Since(asked), reclaimIdle, "the waiting session was let in only when the holder's lease turned reclaimable")
	kept("after max_instances was raised")
	leaseWaitWaiting(t, holder, "counter", 0)
	require.NotNil(t, got.Value)
	assert.Equal(t, 1, *got.Value, "the session kept waiting before leases a clean instance now")
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
	thirdCall := relStartCall(third, "counter_increment", map[string]any{}, nil)
	leaseWaitWaiting(t, holder, "counter", 1) // the call reaches the cap and waits there
	select {
	case o := <-thirdCall:
		t.Fatalf("a new lease was given beyond the lowered max_instances, or refused while leases were quiet: %+v", o)
	default:
	}
	// Only a cap raised again, above the leases that run, lets the third in.
	r.save(config(3, 0))
	assert.Contains(t, r.waitReload(), `applied="counter: lease.max_instances 1 -> 3, lease.prewarm 1 -> 0"`)
	third1, err := leaseDecode(relResult(t, relAwait(t, thirdCall)))
	require.NoError(t, err)
	require.NotNil(t, third1.Value)
	assert.Equal(t, 1, *third1.Value)
	kept("after the third session leased")
	assert.Equal(t, otherPID, leasePID(t, other, "counter_pid"), "the other session's instance was replaced")

	for _, kind := range []string{"reclaimed", "released", "session-ended", "expired", "lost", "recycled"} {
		assert.Empty(t, leaseEvents(r.a, kind, "counter"), "no lease ended: %s", kind)
	}
	assert.Equal(t, 1, strings.Count(r.a.log.String(), `msg="server ready" server=counter `), "the server was started again")
}
