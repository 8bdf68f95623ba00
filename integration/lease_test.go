package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// End-to-end tests of session leasing (SPEC §4): a stateful server gets one instance
// per downstream session, a stateless one is shared, and a lease ends on mcp_release,
// at the end of its session, after lease.idle_ttl, and never while a call is running.
// The pids the demo servers report are real processes, so "the instance stopped" is
// checked on the process table, and "the lease ended" on the aggregator's log.

// leaseWait bounds every wait for a lease event; only reached when something is broken.
const leaseWait = 15 * time.Second

// leaseBlock renders one server of a config: a demo upstream of the given kind whose
// tools are exported as id_<tool>. extra lines (without indentation) are added to it.
func leaseBlock(id, kind string, stateless bool, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    truely-stateless: %t\n    %s\n    transform: [{prefix: %s_}]\n", id, stateless, demoServer(kind), id)
	for _, line := range extra {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// leaseConfig renders a config of the given server blocks.
func leaseConfig(blocks ...string) string {
	return "version: 1\nservers:\n" + strings.Join(blocks, "")
}

// leaseReply is a decoded tool result.
type leaseReply struct {
	Raw     json.RawMessage
	IsError bool
	Texts   []string // the text of every content item, in order
	Value   *int     // structuredContent.value (counter)
	PID     *int     // structuredContent.pid (pid tools)
}

// reminder returns the text of the extra item that reminds the agent to release its
// lease, or "" when there is none. The tool's own content comes first.
func (r leaseReply) reminder() string {
	for _, text := range r.Texts[min(1, len(r.Texts)):] {
		if strings.Contains(text, "mcp_release") {
			return text
		}
	}
	return ""
}

// leaseDecode decodes a tools/call result.
func leaseDecode(raw json.RawMessage) (leaseReply, error) {
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured struct {
			Value *int `json:"value"`
			PID   *int `json:"pid"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return leaseReply{}, fmt.Errorf("undecodable result %.300s: %w", raw, err)
	}
	r := leaseReply{Raw: raw, IsError: res.IsError, Value: res.Structured.Value, PID: res.Structured.PID}
	for _, item := range res.Content {
		r.Texts = append(r.Texts, item.Text)
	}
	return r, nil
}

// leaseTry calls a tool and returns its result, or why there is none (a transport
// failure, a JSON-RPC error, or a result with isError). Safe on any goroutine.
func leaseTry(c *client, name string, args any) (leaseReply, error) {
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := c.request(ctx, c.newID(), "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return leaseReply{}, err
	}
	if len(resp.Error) > 0 {
		return leaseReply{}, fmt.Errorf("tools/call %s: JSON-RPC error %s", name, resp.Error)
	}
	r, err := leaseDecode(resp.Result)
	if err == nil && r.IsError {
		err = fmt.Errorf("tools/call %s: tool error %q", name, r.Texts)
	}
	return r, err
}

// leaseCall is leaseTry on the test's goroutine: a failure ends the test.
func leaseCall(t *testing.T, c *client, name string, args any) leaseReply {
	t.Helper()
	r, err := leaseTry(c, name, args)
	require.NoError(t, err)
	return r
}

// leaseValue calls a counter tool (id_increment, id_get) and returns the value.
func leaseValue(t *testing.T, c *client, tool string) int {
	t.Helper()
	r := leaseCall(t, c, tool, nil)
	require.NotNil(t, r.Value, "no value in %s", r.Raw)
	return *r.Value
}

// leasePID calls a pid tool and returns the pid of the instance that answered.
func leasePID(t *testing.T, c *client, tool string) int {
	t.Helper()
	r := leaseCall(t, c, tool, nil)
	require.NotNil(t, r.PID, "no pid in %s", r.Raw)
	return *r.PID
}

// leaseStatus is what mcp_status reports.
type leaseStatus struct {
	Servers []struct {
		ID        string `json:"id"`
		Mode      string `json:"mode"`
		Instances int    `json:"instances"`
		Leased    int    `json:"leased"`
		Spares    int    `json:"spares"`
		Waiting   int    `json:"waiting"`
	} `json:"servers"`
	Leases []struct {
		Server string `json:"serverId"`
		PID    int    `json:"pid"`
	} `json:"leases"`
}

// leaseStatusOf calls mcp_status as c's session.
func leaseStatusOf(t *testing.T, c *client) leaseStatus {
	t.Helper()
	r := leaseCall(t, c, "mcp_status", nil)
	require.NotEmpty(t, r.Texts)
	var st leaseStatus
	require.NoError(t, json.Unmarshal([]byte(r.Texts[0]), &st), "mcp_status: %s", r.Texts[0])
	return st
}

// leaseHeld returns the pid of c's lease of server per mcp_status, or 0.
func leaseHeld(t *testing.T, c *client, server string) int {
	t.Helper()
	for _, l := range leaseStatusOf(t, c).Leases {
		if l.Server == server {
			return l.PID
		}
	}
	return 0
}

// leaseWaitSpares polls mcp_status until server has want ready spares and no
// instance still starting.
func leaseWaitSpares(t *testing.T, c *client, server string, want int) {
	t.Helper()
	deadline := time.Now().Add(leaseWait)
	for {
		for _, s := range leaseStatusOf(t, c).Servers {
			if s.ID == server && s.Spares == want && s.Instances == s.Leased+s.Spares {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %q never had %d spares ready: %+v", server, want, leaseStatusOf(t, c).Servers)
		}
		time.Sleep(25 * time.Millisecond) // polling a status report: no event to wait on
	}
}

// leaseWaitWaiting waits until mcp_status, asked as c's session, reports
// want calls waiting at a cap for an instance of server.
func leaseWaitWaiting(t *testing.T, c *client, server string, want int) {
	t.Helper()
	deadline := time.Now().Add(leaseWait)
	for {
		for _, s := range leaseStatusOf(t, c).Servers {
			if s.ID == server && s.Waiting == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %q never had %d calls waiting for a lease: %+v", server, want, leaseStatusOf(t, c).Servers)
		}
		time.Sleep(25 * time.Millisecond) // polling a status report: no event to wait on
	}
}

// leaseSession opens an HTTP session that the test ends itself (or abandons): unlike
// aggregator.connect, nothing closes it when the test ends.
func leaseSession(t *testing.T, a *aggregator) *client {
	t.Helper()
	box := newInbox()
	w := newHTTPWire(a.url, box)
	t.Cleanup(w.hc.CloseIdleConnections)
	c := &client{t: t, wire: w, inbox: box}
	c.initialize()
	return c
}

// leaseSessions opens n HTTP sessions with leaseSession.
func leaseSessions(t *testing.T, a *aggregator, n int) []*client {
	t.Helper()
	cs := make([]*client, n)
	for i := range cs {
		cs[i] = leaseSession(t, a)
	}
	return cs
}

// leaseCloseAll ends every session with DELETE, all at once.
func leaseCloseAll(t *testing.T, cs []*client) {
	t.Helper()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.wire.close() }()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "DELETE of session %d", i)
	}
}

// leaseEach runs f for every index at once and fails the test with every error.
func leaseEach(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(i) }()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// leaseEventLine matches the aggregator's log line for one lease event.
var leaseEventLine = regexp.MustCompile(`msg="lease ([a-z-]+)" server=(\S+) .*\bpid=(\d+)`)

// leaseWaitEvent waits for the log line of a lease event (leased, released, expired,
// session-ended, ...) of server's instance pid, and returns the line.
func leaseWaitEvent(t *testing.T, a *aggregator, kind, server string, pid int) string {
	t.Helper()
	line, ok := a.log.waitLine(func(line string) bool {
		m := leaseEventLine.FindStringSubmatch(line)
		return m != nil && m[1] == kind && m[2] == server && m[3] == strconv.Itoa(pid)
	}, leaseWait, a.exited)
	require.True(t, ok, "no %q event for %s pid %d within %s; stderr:\n%s", kind, server, pid, leaseWait, a.log)
	return line
}

// leaseEvents returns the lease events of kind for server logged so far, as pids.
func leaseEvents(a *aggregator, kind, server string) []int {
	var pids []int
	for _, line := range strings.Split(a.log.String(), "\n") {
		if m := leaseEventLine.FindStringSubmatch(line); m != nil && m[1] == kind && m[2] == server {
			pid, _ := strconv.Atoi(m[3])
			pids = append(pids, pid)
		}
	}
	return pids
}

// leaseCounterProcesses returns the pids of the running "demo-server counter"
// processes of a's tree.
func leaseCounterProcesses(t *testing.T, a *aggregator) []int {
	t.Helper()
	var pids []int
	for _, p := range markedProcesses(t, a.marker) {
		if strings.Contains(p.cmdline, "demo-server counter") {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// leaseIncrements increments id_increment n times on c, checking that each call
// sees exactly the count of its own session, and returns the pid of its instance.
func leaseIncrements(c *client, id string, n int) (pid int, err error) {
	r, err := leaseTry(c, id+"_pid", nil)
	if err != nil {
		return 0, err
	}
	if r.PID == nil {
		return 0, fmt.Errorf("no pid in %s", r.Raw)
	}
	pid = *r.PID
	for want := 1; want <= n; want++ {
		r, err := leaseTry(c, id+"_increment", nil)
		if err != nil {
			return 0, err
		}
		if r.Value == nil || *r.Value != want {
			return 0, fmt.Errorf("increment %d of %d on instance %d: got %s", want, n, pid, r.Raw)
		}
	}
	return pid, nil
}

// TestLeaseSessionsGetOwnInstances: concurrent HTTP sessions get different instances
// of a stateful server, whose state they do not share, and one shared instance of a
// stateless server.
func TestLeaseSessionsGetOwnInstances(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, leaseConfig(
		leaseBlock("counter", "counter", false),
		leaseBlock("tools", "tools", true, "tools: {whitelist: [pid]}"),
	))
	a.waitLoaded()
	increments := []int{3, 1, 2}
	sessions := leaseSessions(t, a, len(increments))
	counterPIDs := make([]int, len(sessions))
	toolsPIDs := make([]int, len(sessions))
	leaseEach(t, len(sessions), func(i int) error {
		c := sessions[i]
		var err error
		if counterPIDs[i], err = leaseIncrements(c, "counter", increments[i]); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		r, err := leaseTry(c, "counter_get", nil)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		if r.Value == nil || *r.Value != increments[i] {
			return fmt.Errorf("session %d made %d increments but counter_get says %s", i, increments[i], r.Raw)
		}
		r, err = leaseTry(c, "tools_pid", nil)
		if err == nil && r.PID == nil {
			err = fmt.Errorf("no pid in %s", r.Raw)
		}
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		toolsPIDs[i] = *r.PID
		return nil
	})
	for i := range sessions {
		requireMarked(t, a.marker, counterPIDs[i])
		for j := range i {
			assert.NotEqual(t, counterPIDs[j], counterPIDs[i], "sessions %d and %d share a counter instance", j, i)
		}
		assert.Equal(t, toolsPIDs[0], toolsPIDs[i], "session %d got its own instance of the stateless server", i)
		assert.NotContains(t, counterPIDs, toolsPIDs[i])
		st := leaseStatusOf(t, sessions[i])
		if assert.Len(t, st.Leases, 1, "mcp_status of session %d lists exactly its own lease", i) {
			assert.Equal(t, counterPIDs[i], st.Leases[0].PID)
		}
	}
	leaseCloseAll(t, sessions)
}

// TestLeaseReminder: the first result of a session's lease of a server carries one
// extra text item telling the agent to release it; no other result does, a stateless
// server's never do, and lease_reminder: false turns it off.
func TestLeaseReminder(t *testing.T) {
	t.Parallel()
	config := leaseConfig(
		leaseBlock("counter", "counter", false),
		leaseBlock("quiet", "counter", false, "lease_reminder: false"),
		leaseBlock("tools", "tools", true, "tools: {whitelist: [pid, echo]}"),
	)
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, config)
		a.waitLoaded()
		c := a.connect()

		for range 2 {
			r := leaseCall(t, c, "tools_echo", map[string]any{"text": "hi"})
			assert.Equal(t, []string{"hi"}, r.Texts, "a stateless server's result is passed as is")
		}

		first := leaseCall(t, c, "counter_increment", nil)
		require.Len(t, first.Texts, 2, "the first result of the lease has the upstream's item and the reminder: %s", first.Raw)
		assert.Equal(t, "1", first.Texts[0], "the upstream's own content comes first")
		assert.Contains(t, first.Texts[1], "mcp_release")
		assert.Contains(t, first.Texts[1], `{"serverId": "counter"}`, "the reminder names the server to release")
		require.NotNil(t, first.Value)
		assert.Equal(t, 1, *first.Value, "structuredContent is untouched")

		second := leaseCall(t, c, "counter_increment", nil)
		assert.Equal(t, []string{"2"}, second.Texts, "only the first result of a lease has the reminder")
		assert.Equal(t, []string{"2"}, leaseCall(t, c, "counter_get", nil).Texts, "nor a call of another tool of the leased server")

		assert.Equal(t, []string{"1"}, leaseCall(t, c, "quiet_increment", nil).Texts, "lease_reminder: false")
		assert.Empty(t, leaseCall(t, c, "tools_pid", nil).reminder(), "a stateless server never reminds")
	})

	t.Run("admin off", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, httpTransport, "admin: {lease_reminder: false}\n"+leaseConfig(leaseBlock("counter", "counter", false)))
		a.waitLoaded()
		c := a.connect()
		assert.Equal(t, []string{"1"}, leaseCall(t, c, "counter_increment", nil).Texts, "admin.lease_reminder: false")
	})
}

// TestLeaseRelease: mcp_release ends the lease at once: its instance stops, mcp_status
// no longer lists it, and the next call leases a fresh instance with fresh state.
func TestLeaseRelease(t *testing.T) {
	t.Parallel()
	config := leaseConfig(
		leaseBlock("counter", "counter", false),
		leaseBlock("tools", "tools", true, "tools: {whitelist: [pid]}"),
	)
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, config)
		a.waitLoaded()
		c := a.connect()

		assert.Zero(t, leaseHeld(t, c, "counter"), "no lease before the first call")
		assert.NotEmpty(t, leaseCall(t, c, "counter_increment", nil).reminder())
		assert.Equal(t, 2, leaseValue(t, c, "counter_increment"))
		pid := leasePID(t, c, "counter_pid")
		assert.Equal(t, pid, leaseHeld(t, c, "counter"), "mcp_status lists the lease with its instance")

		released := leaseCall(t, c, "mcp_release", map[string]any{"serverId": "counter"})
		assert.Contains(t, released.Texts[0], "released")
		leaseWaitEvent(t, a, "released", "counter", pid)
		waitGone(t, pid)
		assert.Zero(t, leaseHeld(t, c, "counter"), "mcp_status still lists a released lease")
		again := leaseCall(t, c, "mcp_release", map[string]any{"serverId": "counter"})
		assert.False(t, again.IsError, "releasing twice is harmless")
		assert.Contains(t, again.Texts[0], "nothing to release")
		shared := leaseCall(t, c, "mcp_release", map[string]any{"serverId": "tools"})
		assert.Contains(t, shared.Texts[0], "no lease to release", "a stateless server has no lease")

		fresh := leaseCall(t, c, "counter_increment", nil)
		require.NotNil(t, fresh.Value)
		assert.Equal(t, 1, *fresh.Value, "the fresh instance starts from zero")
		assert.NotEmpty(t, fresh.reminder(), "a new lease reminds again")
		newPID := leasePID(t, c, "counter_pid")
		assert.NotEqual(t, pid, newPID)
		requireMarked(t, a.marker, newPID)
		assert.Equal(t, newPID, leaseHeld(t, c, "counter"))
	})
}

// TestLeaseSessionEnd: when an HTTP session is deleted its instances stop and other
// sessions keep theirs; when the stdio client goes away every upstream stops.
func TestLeaseSessionEnd(t *testing.T) {
	t.Parallel()
	config := leaseConfig(
		leaseBlock("counter", "counter", false),
		leaseBlock("tools", "tools", true, "tools: {whitelist: [pid]}"),
	)
	t.Run("http delete", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, httpTransport, config)
		a.waitLoaded()
		ending, staying := leaseSession(t, a), a.connect()
		endingPID, stayingPID := leasePID(t, ending, "counter_pid"), leasePID(t, staying, "counter_pid")
		assert.Equal(t, 1, leaseValue(t, staying, "counter_increment"))
		require.NotEqual(t, endingPID, stayingPID)
		sharedPID := leasePID(t, ending, "tools_pid")

		require.NoError(t, ending.wire.close())
		leaseWaitEvent(t, a, "session-ended", "counter", endingPID)
		waitGone(t, endingPID)
		assert.Equal(t, stayingPID, leasePID(t, staying, "counter_pid"), "another session's lease is untouched")
		assert.Equal(t, 2, leaseValue(t, staying, "counter_increment"))
		assert.Equal(t, sharedPID, leasePID(t, staying, "tools_pid"), "the shared instance outlives the session")
	})
	t.Run("stdio eof", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, stdioTransport, config)
		a.waitLoaded()
		c := a.connect()
		counterPID, sharedPID := leasePID(t, c, "counter_pid"), leasePID(t, c, "tools_pid")
		requireMarked(t, a.marker, counterPID)
		requireMarked(t, a.marker, sharedPID)

		require.NoError(t, a.stdin.Close()) // how a stdio client ends its session
		select {
		case <-a.exited:
		case <-time.After(stopTimeout):
			t.Fatalf("the aggregator still runs %s after its stdin closed", stopTimeout)
		}
		waitGone(t, counterPID)
		waitGone(t, sharedPID)
		// stop (at cleanup) checks the exit status and that nothing else survived.
	})
}

// TestLeaseIdleExpiry: a lease unused for lease.idle_ttl ends and its instance stops,
// but a call running longer than the TTL keeps it.
func TestLeaseIdleExpiry(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, leaseConfig(
			leaseBlock("counter", "counter", false, "lease: {idle_ttl: 500ms}"),
			leaseBlock("worker", "tools", false, "tools: {whitelist: [slow, pid]}", "lease: {idle_ttl: 300ms}"),
		))
		a.waitLoaded()
		c := a.connect()

		t.Run("idle", func(t *testing.T) {
			pid := leasePID(t, c, "counter_pid")
			leaseWaitEvent(t, a, "expired", "counter", pid)
			waitGone(t, pid)
			assert.Zero(t, leaseHeld(t, c, "counter"), "mcp_status lists an expired lease")
			fresh := leaseCall(t, c, "counter_increment", nil)
			require.NotNil(t, fresh.Value)
			assert.Equal(t, 1, *fresh.Value, "the next call runs on a fresh instance")
			assert.NotEmpty(t, fresh.reminder(), "and is told it holds a new lease")
			assert.NotEqual(t, pid, leasePID(t, c, "counter_pid"))
		})

		t.Run("busy", func(t *testing.T) {
			// The lease's first call takes 1.5s, five times the TTL.
			result := make(chan leaseReply, 1)
			failed := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				defer cancel()
				resp, err := c.request(ctx, c.newID(), "tools/call", map[string]any{
					"name": "worker_slow", "arguments": map[string]any{"seconds": 1.5, "steps": 3},
					"_meta": map[string]any{"progressToken": "busy-lease"},
				})
				if err == nil && len(resp.Error) > 0 {
					err = fmt.Errorf("JSON-RPC error %s", resp.Error)
				}
				var r leaseReply
				if err == nil {
					r, err = leaseDecode(resp.Result)
				}
				if err != nil {
					failed <- err
					return
				}
				result <- r
			}()
			// The second progress comes 1s into the call, when the lease has been idle
			// by the TTL's measure for over three TTLs if calls in flight did not count.
			_, ok := c.waitNotification(func(n notification) bool {
				if n.Method != "notifications/progress" {
					return false
				}
				var p struct {
					Token    string  `json:"progressToken"`
					Progress float64 `json:"progress"`
				}
				return json.Unmarshal(n.Params, &p) == nil && p.Token == "busy-lease" && p.Progress >= 2
			}, leaseWait)
			require.True(t, ok, "no second progress from the slow call")
			pid := leaseHeld(t, c, "worker")
			require.NotZero(t, pid, "the lease of a server with a call in flight expired")
			requireMarked(t, a.marker, pid)

			select {
			case r := <-result:
				assert.Equal(t, "done after 3 steps", r.Texts[0])
				assert.NotEmpty(t, r.reminder(), "the slow call was the lease's first")
			case err := <-failed:
				t.Fatalf("the call that outlasted the idle TTL failed: %v", err)
			case <-time.After(leaseWait):
				t.Fatal("the slow call never completed")
			}
			assert.NotContains(t, leaseEvents(a, "expired", "worker"), pid, "the lease expired during its call")

			// Once the call is done, the lease idles out like any other.
			leaseWaitEvent(t, a, "expired", "worker", pid)
			waitGone(t, pid)
		})
	})
}

// TestLeaseAbandonedHTTPSession: an HTTP session that goes quiet without DELETE
// expires after --session-idle-ttl and takes its lease with it, while a session that
// only keeps its GET stream open stays alive.
func TestLeaseAbandonedHTTPSession(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, leaseConfig(leaseBlock("counter", "counter", false)))},
		flags:   []string{"--session-idle-ttl", ttl.String()},
	})
	a.waitLoaded()

	listening := a.connect()
	listen(t, a, listening)
	assert.Equal(t, 1, leaseValue(t, listening, "counter_increment"))
	listeningPID := leasePID(t, listening, "counter_pid")

	abandoned := leaseSession(t, a)
	quietSince := time.Now() // the session's last activity is its next call, not earlier
	abandonedPID := leasePID(t, abandoned, "counter_pid")

	// Nothing but the abandonment ends the quiet session's lease.
	leaseWaitEvent(t, a, "session-ended", "counter", abandonedPID)
	waitGone(t, abandonedPID)
	assert.GreaterOrEqual(t, time.Since(quietSince), ttl, "the session expired before its idle TTL")

	// The listening session has sent nothing since its last call either; only the
	// heartbeats on its GET stream (every TTL/3, at least 1s) show it is alive. There
	// is no event for "not expired", so watching it for twice the TTL is the test: the
	// sweeper runs every TTL/2 and would have removed it in that window.
	select {
	case <-time.After(time.Until(quietSince.Add(2 * ttl))):
	case <-a.exited:
		t.Fatalf("the aggregator exited; stderr:\n%s", a.log)
	}
	assert.Equal(t, listeningPID, leasePID(t, listening, "counter_pid"), "the live session kept its lease")
	assert.Equal(t, 2, leaseValue(t, listening, "counter_increment"), "and its instance's state")
	assert.NotContains(t, leaseEvents(a, "session-ended", "counter"), listeningPID)
}

// TestLeaseManySessions: 24 concurrent sessions each get an instance of their own that
// counts only their increments, and every instance stops when its session ends. (24 is
// over the default lease.max_instances, so the config raises it.)
func TestLeaseManySessions(t *testing.T) {
	t.Parallel()
	const n = 24
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("counter", "counter", false, "lease: {max_instances: 24}")))
	a.waitLoaded()
	sessions := leaseSessions(t, a, n)
	pids := make([]int, n)
	leaseEach(t, n, func(i int) error {
		var err error
		pids[i], err = leaseIncrements(sessions[i], "counter", 1+i%4)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		return nil
	})
	seen := map[int]int{}
	for i, pid := range pids {
		if j, dup := seen[pid]; dup {
			t.Errorf("sessions %d and %d share instance %d", j, i, pid)
		}
		seen[pid] = i
	}
	assert.Len(t, leaseCounterProcesses(t, a), n, "one instance per session, and no more")

	leaseCloseAll(t, sessions)
	for _, pid := range pids {
		waitGone(t, pid)
	}
	assert.Empty(t, leaseCounterProcesses(t, a), "instances outlived their sessions")
}

// TestLeaseIsolation: sessions that take turns incrementing, one call each per round,
// each count exactly their own increments.
func TestLeaseIsolation(t *testing.T) {
	t.Parallel()
	const sessionCount = 5
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("counter", "counter", false)))
	a.waitLoaded()
	sessions := make([]*client, sessionCount)
	for i := range sessions {
		sessions[i] = a.connect()
	}
	want := func(i int) int { return 3 + 2*i } // increments of session i
	for round := 1; round <= want(sessionCount-1); round++ {
		// In each round every session still counting increments at the same time.
		leaseEach(t, sessionCount, func(i int) error {
			if round > want(i) {
				return nil
			}
			r, err := leaseTry(sessions[i], "counter_increment", nil)
			if err != nil {
				return fmt.Errorf("session %d round %d: %w", i, round, err)
			}
			if r.Value == nil || *r.Value != round {
				return fmt.Errorf("session %d's increment %d saw %s", i, round, r.Raw)
			}
			return nil
		})
	}
	for i, c := range sessions {
		assert.Equal(t, want(i), leaseValue(t, c, "counter_get"), "session %d", i)
	}
}

// TestLeaseCap: under lease.max_instances, while every lease has a call in flight, a
// session with lease.queue_timeout waits that long for an instance, fails saying why,
// and gets one once another session releases its own. (Without a queue it is refused
// at once: TestSupervisionLeaseCapRefusesThe17thSession; while a lease has no call in
// flight, the session waits for it to turn reclaimable: TestLeaseReclaimAbandonedSessions.)
func TestLeaseCap(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, leaseConfig(
		leaseBlock("tools", "tools", false, "lease: {max_instances: 1, queue_timeout: 1s}"),
	))
	a.waitLoaded()
	holder, waiter := a.connect(), a.connect()
	holderPID := leasePID(t, holder, "tools_pid")
	slow := relStartCall(holder, "tools_slow", map[string]any{"seconds": 4}, nil)
	leaseWaitBusy(t, waiter, "tools", 1)

	start := time.Now()
	_, err := leaseTry(waiter, "tools_pid", nil)
	require.Error(t, err, "a second instance was started beyond max_instances: 1")
	assert.Contains(t, err.Error(), "max_instances", "the error says the cap was reached")
	assert.Contains(t, err.Error(), "lease.queue_timeout (1s)")
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the call waited lease.queue_timeout before failing")
	assert.Zero(t, leaseHeld(t, waiter, "tools"), "a failed wait leaves no lease behind")
	relResult(t, relAwait(t, slow))

	leaseCall(t, holder, "mcp_release", map[string]any{"serverId": "tools"})
	waitGone(t, holderPID)
	got := leaseCall(t, waiter, "tools_pid", nil)
	require.NotNil(t, got.PID)
	assert.NotEmpty(t, got.reminder())
	assert.NotEqual(t, holderPID, *got.PID, "the released instance is not handed on")
}

// leaseWaitBusy waits until n leased instances of server have a call in flight, as
// mcp_status, asked by c, lists them.
func leaseWaitBusy(t *testing.T, c *client, server string, n int) {
	t.Helper()
	deadline := time.Now().Add(callTimeout)
	for {
		busy := 0
		list := supInstances(t, c)
		for _, in := range list {
			if in.Server == server && in.Role == "leased" && in.InFlight > 0 {
				busy++
			}
		}
		if busy >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d leased instances of %s have a call in flight: %+v", busy, n, server, list)
		time.Sleep(20 * time.Millisecond) // status is polled: no event says a call reached the instance
	}
}

// TestLeasePrewarm: lease.prewarm keeps spares ready, and a new session's first call
// takes one instead of starting a process.
func TestLeasePrewarm(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("counter", "counter", false, "lease: {prewarm: 2}")))
	a.waitLoaded()
	observer, c := a.connect(), a.connect()
	leaseWaitSpares(t, observer, "counter", 2)
	spares := leaseCounterProcesses(t, a)
	require.Len(t, spares, 2, "two spares and no other instance")

	first := leaseCall(t, c, "counter_increment", nil)
	require.NotNil(t, first.Value)
	assert.Equal(t, 1, *first.Value, "a spare is clean")
	pid := leasePID(t, c, "counter_pid")
	assert.Contains(t, spares, pid, "the first call ran on a spare")
	assert.Equal(t, []int{pid}, leaseEvents(a, "leased", "counter"))

	// The pool makes up for the spare it handed out.
	leaseWaitSpares(t, observer, "counter", 2)
	assert.Len(t, leaseCounterProcesses(t, a), 3)
}

// TestLeaseConcurrentFirstCalls: a session whose first calls to a stateful server
// arrive together still gets one instance, so they all see the same state.
func TestLeaseConcurrentFirstCalls(t *testing.T) {
	t.Parallel()
	const calls = 4
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("counter", "counter", false)))
	a.waitLoaded()
	// Another session takes the spare left from startup, so the next lease has to
	// start a process: the calls below overlap while it starts.
	other := a.connect()
	leasePID(t, other, "counter_pid")

	c := a.connect()
	values := make([]int, calls)
	leaseEach(t, calls, func(i int) error {
		r, err := leaseTry(c, "counter_increment", nil)
		if err == nil && r.Value == nil {
			err = fmt.Errorf("no value in %s", r.Raw)
		}
		if err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		values[i] = *r.Value
		return nil
	})
	assert.ElementsMatch(t, []int{1, 2, 3, 4}, values, "the session's calls ran on more than one instance")
	assert.Equal(t, calls, leaseValue(t, c, "counter_get"))
	assert.Len(t, leaseCounterProcesses(t, a), 2, "one instance per session: %v", leaseEvents(a, "leased", "counter"))

	pid := leasePID(t, c, "counter_pid")
	leaseCall(t, c, "mcp_release", map[string]any{"serverId": "counter"})
	waitGone(t, pid)
	assert.Len(t, leaseCounterProcesses(t, a), 1, "after the release only the other session's instance runs")
}

// TestLeaseReleaseDuringCall: mcp_release while the session's call is running lets
// the call finish, then stops the instance.
func TestLeaseReleaseDuringCall(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, leaseConfig(leaseBlock("worker", "tools", false, "tools: {whitelist: [slow, pid]}")))
	a.waitLoaded()
	c := a.connect()
	pid := leasePID(t, c, "worker_pid")

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		resp, err := c.request(ctx, c.newID(), "tools/call", map[string]any{
			"name": "worker_slow", "arguments": map[string]any{"seconds": 1, "steps": 2},
			"_meta": map[string]any{"progressToken": "released-while-busy"},
		})
		if err == nil && len(resp.Error) > 0 {
			err = fmt.Errorf("JSON-RPC error %s", resp.Error)
		}
		if err == nil {
			var r leaseReply
			if r, err = leaseDecode(resp.Result); err == nil && (r.IsError || len(r.Texts) == 0 || r.Texts[0] != "done after 2 steps") {
				err = fmt.Errorf("unexpected result %s", r.Raw)
			}
		}
		done <- err
	}()
	_, ok := c.waitNotification(func(n notification) bool { return n.Method == "notifications/progress" }, leaseWait)
	require.True(t, ok, "no progress from the slow call")
	leaseCall(t, c, "mcp_release", map[string]any{"serverId": "worker"})
	leaseWaitEvent(t, a, "released", "worker", pid)
	select {
	case err := <-done:
		require.NoError(t, err, "the call running when its lease was released")
	case <-time.After(leaseWait):
		t.Fatal("the slow call never completed")
	}
	waitGone(t, pid)
	assert.NotEqual(t, pid, leasePID(t, c, "worker_pid"), "the next call leases a fresh instance")
}

// TestLeaseReminderAfterARead: when a session's first use of a leased server is a
// resources/read, whose result has no room for it, the reminder comes with the first
// tool result instead, and only there.
func TestLeaseReminderAfterARead(t *testing.T) {
	t.Parallel()
	entry := nodeEntry(t, everythingEntry)
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		everythingYAML("every", entry, "transform: [{prefix: ev_}]", "tools: {whitelist: ['echo']}"))
	a.waitLoaded()
	c := a.connect()
	list := mustResult(t, c.mustRequest("resources/list", map[string]any{}), "list")["resources"].([]any)
	require.NotEmpty(t, list)
	uri := list[0].(map[string]any)["uri"].(string)
	mustResult(t, c.mustRequest("resources/read", map[string]any{"uri": uri}), "read")
	require.NotZero(t, leaseHeld(t, c, "every"), "the read leased an instance")

	first := leaseCall(t, c, "ev_echo", map[string]any{"message": "hi"})
	assert.Contains(t, first.reminder(), `{"serverId": "every"}`, "the first tool result carries the reminder: %s", first.Raw)
	assert.Empty(t, leaseCall(t, c, "ev_echo", map[string]any{"message": "again"}).reminder(), "and no later one")
}
