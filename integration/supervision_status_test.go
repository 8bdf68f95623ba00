package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// supInstance is one entry of mcp_status's instance list.
type supInstance struct {
	Server    string `json:"serverId"`
	PID       int    `json:"pid"`
	Role      string `json:"role"`
	Session   string `json:"session"`
	Yours     bool   `json:"yours"`
	Age       string `json:"age"`
	Calls     int64  `json:"calls"`
	InFlight  int    `json:"inFlight"`
	RSS       int64  `json:"rssBytes"`
	Processes int    `json:"processes"`
	Restarts  int    `json:"restarts"`
}

// supInstances calls mcp_status and returns its instance list.
func supInstances(t *testing.T, c *client) []supInstance {
	t.Helper()
	var st struct {
		Instances *[]supInstance `json:"instances"`
	}
	text := firstText(t, c.callToolResult("mcp_status", map[string]any{}))
	require.NoError(t, json.Unmarshal([]byte(text), &st), "mcp_status: %s", text)
	require.NotNil(t, st.Instances, "mcp_status has no instance list: %s", text)
	return *st.Instances
}

// TestSupervisionStatusListsEveryInstance: mcp_status lists each instance with its
// server, pid, role, session, age, calls, calls in flight, memory and restarts, for
// every session's instances and the shared ones, and names no session by its id.
func TestSupervisionStatusListsEveryInstance(t *testing.T) {
	t.Parallel()
	eachSupervisionPath(t, func(t *testing.T, path supervisionPath) {
		a := startAggregator(t, httpTransport, aggregatorOptions{flags: path.flags, configs: []string{writeConfig(t, demoCounterConfig())}})
		a.waitLoaded()
		mine, other := a.connect(), a.connect()
		supervisionMode(t, mine, path)
		myCounter := pidOf(t, mine, "counter_pid")
		shared := pidOf(t, mine, "demo_pid")
		otherCounter := pidOf(t, other, "counter_pid")
		require.NotEqual(t, myCounter, otherCounter)

		// A call of the other session in flight while this one asks.
		slow := relStartCall(other, "demo_slow", map[string]any{"seconds": 1.5}, nil)
		var list []supInstance
		deadline := time.Now().Add(callTimeout)
		for {
			list = supInstances(t, mine)
			busy := false
			for _, in := range list {
				busy = busy || (in.Role == "shared" && in.InFlight == 1)
			}
			if busy {
				break
			}
			require.True(t, time.Now().Before(deadline), "the slow call never showed as in flight: %+v", list)
			time.Sleep(20 * time.Millisecond) // status is polled: no event says a call reached the instance
		}
		relResult(t, relAwait(t, slow))

		require.Len(t, list, 3, "one shared instance and two leases: %+v", list)
		byPID := map[int]supInstance{}
		for _, in := range list {
			byPID[in.PID] = in
			requireMarked(t, a.marker, in.PID)
			assert.Greater(t, in.RSS, int64(1<<20), "%+v: a process holds at least a MiB", in)
			assert.GreaterOrEqual(t, in.Processes, 1, "%+v", in)
			age, err := time.ParseDuration(in.Age)
			if assert.NoError(t, err, "%+v", in) {
				assert.Less(t, age, 10*time.Minute)
			}
			assert.Zero(t, in.Restarts, "%+v", in)
		}
		t.Logf("instances: %+v", list)

		s := byPID[shared]
		assert.Equal(t, "demo", s.Server)
		assert.Equal(t, "shared", s.Role)
		assert.Empty(t, s.Session)
		assert.GreaterOrEqual(t, s.Calls, int64(2), "demo_pid and demo_slow")

		m := byPID[myCounter]
		assert.Equal(t, "counter", m.Server)
		assert.Equal(t, "leased", m.Role)
		assert.True(t, m.Yours)
		assert.Equal(t, int64(1), m.Calls)
		assert.Zero(t, m.InFlight)

		o := byPID[otherCounter]
		assert.Equal(t, "leased", o.Role)
		assert.False(t, o.Yours)
		assert.NotEmpty(t, o.Session)
		assert.NotEqual(t, m.Session, o.Session, "each session has its own digest")

		// Session ids are credentials over HTTP: the list must not show them.
		for _, c := range []*client{mine, other} {
			w := c.wire.(*httpWire)
			w.mu.Lock()
			id := w.session
			w.mu.Unlock()
			require.NotEmpty(t, id)
			for _, in := range list {
				assert.False(t, strings.Contains(id, in.Session) && in.Session != "", "session %q shows in %+v", id, in)
			}
		}
	})
}

// TestSupervisionMaxCallsRecycles: with lease.max_calls: 2 a session's third call runs
// on a new process, is told its state was reset, and the old process is gone.
func TestSupervisionMaxCallsRecycles(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, supCounterConfig("", "lease: {max_calls: 2}"))
		a.waitLoaded()
		c := a.connect()
		first := pidOf(t, c, "counter_pid")
		assert.Equal(t, first, pidOf(t, c, "counter_pid"), "the second call runs on the same instance")

		third := c.callToolResult("counter_pid", map[string]any{})
		next := int(mustInt(t, structured(t, third)["pid"]))
		assert.NotEqual(t, first, next, "recycled after lease.max_calls: a new pid")
		requireMarked(t, a.marker, next)
		assert.Contains(t, strings.Join(relTexts(t, third), "\n"), "lease.max_calls or lease.max_age", "the agent is told its state was reset")
		relWaitGone(t, relTree{"recycled instance": first}, survivorTimeout)

		var mine *supInstance
		for _, in := range supInstances(t, c) {
			if in.Yours {
				mine = &in
			}
		}
		require.NotNil(t, mine)
		assert.Equal(t, next, mine.PID)
		assert.Equal(t, 1, mine.Restarts, "the lease's second instance")
		assert.Equal(t, int64(1), mine.Calls)
	})
}

func mustInt(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	require.True(t, ok, "%v is not a number", v)
	i, err := n.Int64()
	require.NoError(t, err)
	return i
}
