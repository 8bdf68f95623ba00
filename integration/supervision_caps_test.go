package integration

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// defaultLeaseCap is lease.max_instances when a config leaves it out.
const defaultLeaseCap = 16

// supCounterConfig serves the counter demo server, leased per session, as counter_*;
// extra lines (indented for the top level) go in front of servers.
func supCounterConfig(top string, server ...string) string {
	cfg := "version: 1\n" + top + "servers:\n  counter:\n    " + demoServer("counter") + "\n    transform: [{prefix: counter_}]\n"
	for _, line := range server {
		cfg += "    " + line + "\n"
	}
	return cfg
}

// supPID returns the pid a demo pid tool reported in a call's result.
func supPID(t *testing.T, o relOutcome) int {
	t.Helper()
	pid, err := structured(t, relResult(t, o))["pid"].(json.Number).Int64()
	require.NoError(t, err)
	return int(pid)
}

// TestSupervisionLeaseCapRefusesThe17thSession: without any cap in the config, 16
// sessions lease 16 instances of a stateful server, and while each has a call in
// flight the 17th is refused at once with a message that names lease.max_instances,
// until one of the 16 lets go.
func TestSupervisionLeaseCapRefusesThe17thSession(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, "version: 1\nservers:\n  counter:\n    truely-stateless: false\n    "+
		demoServer("tools")+"\n    transform: [{prefix: counter_}]\n")
	a.waitLoaded()

	clients := make([]*client, defaultLeaseCap)
	for i := range clients {
		clients[i] = a.connect()
	}
	outcomes := make([]relOutcome, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i] = relCall(c, "counter_pid", map[string]any{}, nil)
		}()
	}
	wg.Wait()
	pids := map[int]bool{}
	for _, o := range outcomes {
		pid := supPID(t, o)
		requireMarked(t, a.marker, pid)
		pids[pid] = true
	}
	require.Len(t, pids, defaultLeaseCap, "each session has an instance of its own")
	// A call in flight on every lease: none of them is reclaimable.
	slow := make([]<-chan relOutcome, len(clients))
	for i, c := range clients {
		slow[i] = relStartCall(c, "counter_slow", map[string]any{"seconds": 3}, nil)
	}

	extra := a.connect()
	leaseWaitBusy(t, extra, "counter", defaultLeaseCap)
	refused := relCall(extra, "counter_pid", map[string]any{}, nil)
	msg := relErrorMessage(t, refused)
	t.Logf("the 17th session was refused in %s: %s", refused.elapsed, msg)
	assert.Contains(t, msg, "lease.max_instances")
	assert.Contains(t, msg, "16")
	relAssertFast(t, refused, "refusing the 17th session")

	// mcp_status counts the 16, all leased.
	leased := 0
	for _, in := range supInstances(t, extra) {
		if in.Server == "counter" {
			assert.Equal(t, "leased", in.Role)
			assert.False(t, in.Yours, "the refused session holds none")
			leased++
		}
	}
	assert.Equal(t, defaultLeaseCap, leased)

	for _, ch := range slow {
		relResult(t, relAwait(t, ch))
	}

	// One session lets go; once its process is gone the 17th gets an instance.
	assert.Contains(t, firstText(t, clients[0].callToolResult("mcp_release", map[string]any{"serverId": "counter"})), "released")
	deadline := time.Now().Add(survivorTimeout)
	for {
		o := relCall(extra, "counter_pid", map[string]any{}, nil)
		if o.resp != nil && len(o.resp.Error) == 0 {
			assert.False(t, pids[supPID(t, o)], "a new instance")
			break
		}
		require.True(t, time.Now().Before(deadline), "the freed instance never reached the 17th session: %s", o.resp.Error)
		time.Sleep(50 * time.Millisecond) // the released instance closes on its own time
	}
}

// TestSupervisionGlobalLimit: limits.max_instances caps instances across servers.
func TestSupervisionGlobalLimit(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, `version: 1
limits: {max_instances: 2}
servers:
  a:
    `+demoServer("counter")+`
    transform: [{prefix: a_}]
  b:
    `+demoServer("counter")+`
    transform: [{prefix: b_}]
`)
	a.waitLoaded()
	first := a.connect()
	// Each server's first instance runs already; the first session leases both.
	supPID(t, relCall(first, "a_pid", map[string]any{}, nil))
	supPID(t, relCall(first, "b_pid", map[string]any{}, nil))

	second := a.connect()
	refused := relCall(second, "a_pid", map[string]any{}, nil)
	msg := relErrorMessage(t, refused)
	assert.Contains(t, msg, "limits.max_instances: 2")
	relAssertFast(t, refused, "refusing an instance over limits.max_instances")
}
