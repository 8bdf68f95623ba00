package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// coreCounterConfig serves a stateful counter (counter_increment, counter_get,
// counter_pid) with no spares: the first lease takes the instance that listed the
// tools, and every later lease needs a new process, which the process table shows.
func coreCounterConfig(extra ...string) string {
	return leaseConfig(leaseBlock("counter", "counter", false, "lease: {prewarm: 0}")) + strings.Join(extra, "")
}

// coreIncrementBody is a tools/call of counter_increment.
const coreIncrementBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"counter_increment","arguments":{}}}`

// coreAssertSessionRejected sends a tools/call and opens a GET stream under session,
// an id the server must not know, and requires 404 for both, and that neither
// leased an instance nor started a process.
func coreAssertSessionRejected(t *testing.T, a *aggregator, session, why string) {
	t.Helper()
	leasedBefore := leaseEvents(a, "leased", "counter")
	procsBefore := leaseCounterProcesses(t, a)

	post := corePost(t, a.url, session, []byte(coreIncrementBody), nil)
	assert.Equal(t, http.StatusNotFound, post.status,
		"POST tools/call with %s session id %q: want 404 so the client re-initializes; got body %.300s", why, session, post.body)
	assert.Empty(t, post.header.Get("Mcp-Session-Id"), "a rejected request must not be handed a session")

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	resp.Body.Close() // a wrongly accepted stream would never end
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "GET stream with %s session id %q", why, session)

	// A lease is taken (and its process started) before the call's response is
	// written, so by now any would show.
	assert.Equal(t, leasedBefore, leaseEvents(a, "leased", "counter"),
		"a request with %s session id %q leased an upstream instance", why, session)
	assert.ElementsMatch(t, procsBefore, leaseCounterProcesses(t, a),
		"a request with %s session id %q started an upstream process", why, session)
}

// coreCounterStatus returns the counter server's line of mcp_status, as seen by a
// fresh session.
func coreCounterStatus(t *testing.T, a *aggregator) (leased, instances int) {
	t.Helper()
	observer := leaseSession(t, a)
	defer observer.wire.close()
	for _, s := range leaseStatusOf(t, observer).Servers {
		if s.ID == "counter" {
			return s.Leased, s.Instances
		}
	}
	t.Fatalf("mcp_status does not list the counter server")
	return 0, 0
}

// TestCoreSessionIDs: a session id the server never issued, one ended by DELETE and
// one expired after --session-idle-ttl each get 404, never reach a tool, and start no
// upstream (issue 10: 40 forged ids used to leave 40 upstream processes behind).
func TestCoreSessionIDs(t *testing.T) {
	t.Parallel()

	t.Run("forged", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, httpTransport, coreCounterConfig())
		a.waitLoaded()
		owner := a.connect()
		for range 3 {
			leaseValue(t, owner, "counter_increment")
		}
		ownerPID := leaseHeld(t, owner, "counter")
		require.NotZero(t, ownerPID, "the owner holds no lease")
		require.Equal(t, []int{ownerPID}, leaseCounterProcesses(t, a), "before the forged requests only the owner's instance runs")

		real := coreSessionOf(t, owner)
		random := make([]byte, 16)
		_, _ = rand.Read(random)
		// The real id with its last character changed: a near miss must not pass.
		last := "0"
		if strings.HasSuffix(real, "0") {
			last = "1"
		}
		near := real[:len(real)-1] + last
		for _, id := range []string{"forged-session", hex.EncodeToString(random), near} {
			coreAssertSessionRejected(t, a, id, "a forged")
		}
		assert.Equal(t, 3, coreCounterValue(t, owner, "counter_get"), "the owner's counter is untouched")
		leased, instances := coreCounterStatus(t, a)
		assert.Equal(t, 1, leased, "mcp_status: only the owner holds a lease")
		assert.Equal(t, 1, instances, "mcp_status: only the owner's instance runs")
	})

	t.Run("deleted", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, httpTransport, coreCounterConfig())
		a.waitLoaded()
		owner, id, pid := coreCounterSession(t, a)
		require.NoError(t, owner.wire.close(), "DELETE")
		leaseWaitEvent(t, a, "session-ended", "counter", pid)
		waitGone(t, pid)
		require.Empty(t, leaseCounterProcesses(t, a), "no counter instance runs once the only session ended")

		coreAssertSessionRejected(t, a, id, "a deleted")
		leased, instances := coreCounterStatus(t, a)
		assert.Zero(t, leased, "mcp_status: no lease after the session was deleted")
		assert.Zero(t, instances, "mcp_status: no instance after the session was deleted")
	})

	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		a := startAggregator(t, httpTransport, aggregatorOptions{
			configs: []string{writeConfig(t, coreCounterConfig())},
			flags:   []string{"--session-idle-ttl", "2s"},
		})
		a.waitLoaded()
		_, id, pid := coreCounterSession(t, a)
		// The session's end is announced by its lease ending.
		leaseWaitEvent(t, a, "session-ended", "counter", pid)
		waitGone(t, pid)

		coreAssertSessionRejected(t, a, id, "an expired")
		leased, _ := coreCounterStatus(t, a)
		assert.Zero(t, leased, "mcp_status: no lease after the session expired")
	})
}

// coreCounterSession opens a session of a that leases the counter (one
// increment), and returns it, its session id and its counter's pid.
func coreCounterSession(t *testing.T, a *aggregator) (owner *client, id string, pid int) {
	t.Helper()
	owner = leaseSession(t, a)
	leaseValue(t, owner, "counter_increment")
	pid = leaseHeld(t, owner, "counter")
	require.NotZero(t, pid)
	return owner, coreSessionOf(t, owner), pid
}

// TestCoreLeaseEndsWithSession: a lease never outlives its session. DELETE stops the
// session's instance, also while one of its calls is still running (issue 10).
func TestCoreLeaseEndsWithSession(t *testing.T) {
	t.Parallel()
	config := leaseConfig(
		leaseBlock("counter", "counter", false),
		leaseBlock("worker", "tools", false, "tools: {whitelist: [slow, pid]}"),
	)

	t.Run("idle session", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, httpTransport, config)
		a.waitLoaded()
		s := leaseSession(t, a)
		leaseValue(t, s, "counter_increment")
		pid := leaseHeld(t, s, "counter")
		require.NotZero(t, pid, "mcp_status lists no lease of counter")
		requireMarked(t, a.marker, pid)
		require.NoError(t, s.wire.close(), "DELETE")
		waitGone(t, pid)
	})

	t.Run("call in flight", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, httpTransport, config)
		a.waitLoaded()
		s := leaseSession(t, a)
		// The call would take a minute: longer than any drain limit, so only
		// ending the call with its session stops the instance in time.
		call := relStartCall(s, "worker_slow", map[string]any{"seconds": 60, "steps": 60},
			map[string]any{"progressToken": "in-flight"})
		_, ok := s.waitNotification(func(n notification) bool { return n.Method == "notifications/progress" }, leaseWait)
		require.True(t, ok, "the slow call never reported progress")
		pid := leaseHeld(t, s, "worker")
		require.NotZero(t, pid, "mcp_status lists no lease of worker while its call runs")
		requireMarked(t, a.marker, pid)

		deleted := time.Now()
		require.NoError(t, s.wire.close(), "DELETE while a call runs")
		waitGone(t, pid)
		t.Logf("the leased instance was gone %s after DELETE", time.Since(deleted).Round(time.Millisecond))
		select {
		case o := <-call:
			t.Logf("the call of the deleted session ended after %s: err=%v", o.elapsed.Round(time.Millisecond), o.err)
		case <-time.After(reloadWait):
			t.Errorf("the POST stream of a call of the deleted session is still open %s after DELETE", reloadWait)
		}
	})
}
