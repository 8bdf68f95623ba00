package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reclaimIdle is how long a lease must go unused before a session over
// lease.max_instances may take its place (session.DefaultReclaimIdle).
const reclaimIdle = 10 * time.Second

// TestLeaseReclaimAbandonedSessions: sessions that take every instance of a leased
// server at its default lease.max_instances and then go away without DELETE do not
// lock the server until --session-idle-ttl. While they called within the last 10s a
// new session is not refused: its call waits until the first of them has gone 10s
// unused, and then gets the instance of the abandoned session idle longest, while a
// session that keeps its GET stream open is passed over though it called first. The reclaimed session's next call runs on a
// fresh instance and says its state was lost, and /metrics counts each reclaim.
func TestLeaseReclaimAbandonedSessions(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("counter", "counter", false)))
	a.waitLoaded()

	// Session 0 calls first and keeps its GET stream open; the others call, in
	// order, and are abandoned.
	sessions := leaseSessions(t, a, defaultLeaseCap)
	listen(t, a, sessions[0])
	pids := make([]int, len(sessions))
	lastSent := make([]time.Time, len(sessions)) // when each session's last call was sent
	for i, c := range sessions {
		assert.Equal(t, 1, leaseValue(t, c, "counter_increment"))
		lastSent[i] = time.Now()
		pids[i] = leasePID(t, c, "counter_pid")
	}
	lastCall := time.Now()

	newcomer := leaseSession(t, a)
	got := leaseCall(t, newcomer, "counter_pid", nil)
	require.NotNil(t, got.PID)
	// The lease reclaimed is session 1's (checked below). Its last call
	// ended after it was sent, and a lease turns reclaimable 10 s after its
	// last call ends: so however slow the machine, the newcomer's answer
	// comes at least reclaimIdle after that call was sent.
	waited := time.Since(lastSent[1])
	t.Logf("the newcomer's call was answered %s after session 1's last call was sent, %s after the last call of all", waited, time.Since(lastCall))
	assert.GreaterOrEqual(t, waited, reclaimIdle, "a lease used within the last 10s was reclaimed")
	assert.Less(t, time.Since(lastCall), reclaimIdle+20*time.Second, "the newcomer waited well past the moment a lease turned reclaimable")
	assert.NotEmpty(t, got.reminder(), "the newcomer holds a lease like any other")
	leaseWaitEvent(t, a, "reclaimed", "counter", pids[1])
	assert.Equal(t, []int{pids[1]}, leaseEvents(a, "reclaimed", "counter"),
		"the abandoned session idle longest is reclaimed, not the one still listening")
	waitGone(t, pids[1])
	assert.Equal(t, 2, leaseValue(t, sessions[0], "counter_increment"), "the listening session kept its instance")

	// The reclaimed session's next call takes the place of the next abandoned one.
	again := leaseCall(t, sessions[1], "counter_increment", nil)
	require.NotNil(t, again.Value)
	assert.Equal(t, 1, *again.Value, "a fresh instance")
	assert.True(t, containsNote(again.Texts, "reclaimed", "state was lost"), "no notice in %q", again.Texts)
	leaseWaitEvent(t, a, "reclaimed", "counter", pids[2])
	assert.Equal(t, []int{pids[1], pids[2]}, leaseEvents(a, "reclaimed", "counter"))
	next := leaseCall(t, sessions[1], "counter_increment", nil)
	assert.False(t, containsNote(next.Texts, "reclaimed"), "the notice is given once")

	fams := opsScrape(t, a)
	assert.Equal(t, 2.0, opsValue(t, fams, "mcp_aggregator_lease_reclaims_total", map[string]string{"server": "counter"}))
}

// containsNote reports whether one of texts, after the tool's own first item,
// contains every one of parts.
func containsNote(texts []string, parts ...string) bool {
	for _, text := range texts[min(1, len(texts)):] {
		if containsAll(text, parts...) {
			return true
		}
	}
	return false
}
