package integration

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relRecoverTimeout bounds a shared instance's restart after a crash: the first
// restart is due after the minimal backoff, a fraction of a second.
const relRecoverTimeout = 20 * time.Second

// relCrashConfig serves the crash-after demo server as "crash" (shared or leased), and
// a good shared server "demo".
func relCrashConfig(shared bool, crashAt int) string {
	return `version: 1
servers:
  crash:
    truely-stateless: ` + strconv.FormatBool(shared) + `
    ` + demoServer("misbehave", "crash-after", strconv.Itoa(crashAt)) + `
    request_timeout: 30s
    transform: [{prefix: crash_}]
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
`
}

// relCrashLine is the stderr line of the crash-after server when the nth call reaches it.
func relCrashLine(n int) string {
	return `line="crashing on tools/call number ` + strconv.Itoa(n) + `"`
}

// TestReliabilitySharedCrash lets a shared upstream exit in the middle of a call: the
// call fails at once with an error naming the server, the instance is restarted, and
// mcp_status reports it healthy again.
func TestReliabilitySharedCrash(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, relCrashConfig(true, 1))
		a.waitLoaded()
		c := a.connect()
		before := relStatus(t, c).relSharedPID("crash")
		require.NotZero(t, before)

		o := relCall(c, "crash_ping_tool", map[string]any{}, nil)
		msg := relErrorMessage(t, o)
		assert.Contains(t, msg, `server "crash"`, "the error names the server")
		relAssertFast(t, o, "a call whose upstream crashed (request_timeout 30s)")

		relLogLine(t, a, relRecoverTimeout, `msg="lease lost"`, "server=crash", "pid="+strconv.Itoa(before))
		relLogLine(t, a, relRecoverTimeout, `msg="lease restarted"`, "server=crash")
		relWaitHealth(t, c, "crash", func(h string) bool { return h == "ok" }, relRecoverTimeout)
		after := relStatus(t, c).relSharedPID("crash")
		assert.NotZero(t, after)
		assert.NotEqual(t, before, after, "a new process replaced the crashed one")
		requireMarked(t, a.marker, after)
		assert.False(t, relRunning(before), "the crashed process is gone")

		// The other server never noticed.
		assert.Equal(t, "still fine", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "still fine"})))
	})
}

// TestReliabilityLeasedCrash lets a session's dedicated instance exit in the middle of
// a call: that call fails at once, and the session's next call runs on a fresh
// instance and says that the previous one, with its state, was lost.
func TestReliabilityLeasedCrash(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, tr transport) {
		// The server crashes on its second call: the first one leases it, the second
		// one crashes it, and the fresh instance answers the third.
		a := serveConfig(t, tr, relCrashConfig(false, 2))
		a.waitLoaded()
		c := a.connect()

		assert.Equal(t, "pong", firstText(t, relResult(t, relCall(c, "crash_ping_tool", map[string]any{}, nil))))
		first := relStatus(t, c).relLeasePID("crash")
		require.NotZero(t, first, "the session holds an instance of crash")

		o := relCall(c, "crash_ping_tool", map[string]any{}, nil)
		msg := relErrorMessage(t, o)
		assert.Contains(t, msg, `server "crash"`, "the error names the server")
		relAssertFast(t, o, "a call whose leased upstream crashed (request_timeout 30s)")
		relLogLine(t, a, relRecoverTimeout, relCrashLine(2))

		result := relResult(t, relCall(c, "crash_ping_tool", map[string]any{}, nil))
		texts := relTexts(t, result)
		require.NotEmpty(t, texts)
		assert.Equal(t, "pong", texts[0], "the fresh instance answered")
		lostNote := false
		for _, text := range texts[1:] {
			if containsAll(text, `"crash"`, "stopped unexpectedly", "state was lost") {
				lostNote = true
			}
		}
		assert.True(t, lostNote, "the result says the previous instance was lost: %q", texts)
		relLogLine(t, a, relRecoverTimeout, `msg="lease lost"`, "server=crash", "pid="+strconv.Itoa(first))

		second := relStatus(t, c).relLeasePID("crash")
		assert.NotZero(t, second)
		assert.NotEqual(t, first, second, "the session got a new instance")
		requireMarked(t, a.marker, second)

		// The other server never noticed.
		assert.Equal(t, []string{"x"}, relTexts(t, relResult(t, relCall(c, "demo_echo", map[string]any{"text": "x"}, nil))))
	})
}

// TestReliabilityCallNeverRetried checks that a tools/call that may have reached the
// upstream is not sent again: when the shared upstream dies on a call, the caller gets
// an error, not a silent success from the restarted instance, and the restarted
// instance never sees that call.
func TestReliabilityCallNeverRetried(t *testing.T) {
	t.Parallel()
	// The server crashes on its second call. A retry of that call on the restarted
	// instance would be the fresh instance's first call, which succeeds.
	a := serveConfig(t, stdioTransport, relCrashConfig(true, 2))
	a.waitLoaded()
	c := a.connect()

	assert.Equal(t, "pong", firstText(t, relResult(t, relCall(c, "crash_ping_tool", map[string]any{}, nil))))
	o := relCall(c, "crash_ping_tool", map[string]any{}, nil)
	assert.Contains(t, relErrorMessage(t, o), `server "crash"`)
	relLogLine(t, a, relRecoverTimeout, relCrashLine(2))
	relLogLine(t, a, relRecoverTimeout, `msg="lease restarted"`, "server=crash")
	relWaitHealth(t, c, "crash", func(h string) bool { return h == "ok" }, relRecoverTimeout)

	// The restarted instance has not received any call yet: this one is its first,
	// and so it succeeds (it would crash, as its second, after a hidden retry).
	assert.Equal(t, "pong", firstText(t, relResult(t, relCall(c, "crash_ping_tool", map[string]any{}, nil))),
		"the restarted instance answers its first call")
	assert.Equal(t, 1, relCountLines(a, "server=crash", relCrashLine(2)), "the crashing call reached an upstream exactly once")
	assert.Equal(t, 0, relCountLines(a, "server=crash", relCrashLine(3)))
}

// relHungShared serves a shared demo upstream pinged every 200ms and
// stops its process (SIGSTOP), so that it neither answers nor exits; the
// process is killed when the test ends if it is still there.
func relHungShared(t *testing.T) (*aggregator, *client, int) {
	t.Helper()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		serverEntry("demo", "demo_", statelessServer, demoServer("tools"), "ping_interval: 200ms", "request_timeout: 30s"))
	a.waitLoaded()
	c := a.connect()
	hung := pidOf(t, c, "demo_pid")
	requireMarked(t, a.marker, hung)
	require.NoError(t, syscall.Kill(hung, syscall.SIGSTOP))
	t.Cleanup(func() {
		if relRunning(hung) {
			_ = syscall.Kill(hung, syscall.SIGKILL)
			_ = syscall.Kill(hung, syscall.SIGCONT)
		}
	})
	return a, c, hung
}

// TestReliabilityPingReplacesHungInstance stops a shared upstream's process (SIGSTOP),
// so it neither answers nor exits: two failed pings later it must be replaced.
func TestReliabilityPingReplacesHungInstance(t *testing.T) {
	t.Parallel()
	a, c, hung := relHungShared(t)
	stopped := time.Now()
	relLogLine(t, a, relRecoverTimeout, `msg="lease lost"`, "server=demo", "pid="+strconv.Itoa(hung), "two pings")
	detected := time.Since(stopped)
	relLogLine(t, a, relRecoverTimeout, `msg="lease restarted"`, "server=demo")
	restarted := time.Since(stopped)
	t.Logf("hang detected after %s, replacement running after %s", detected, restarted)

	fresh := pidOf(t, c, "demo_pid")
	assert.NotEqual(t, hung, fresh, "a new process answers")
	requireMarked(t, a.marker, fresh)
	assert.Equal(t, "ok", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "ok"})))
	relWaitGone(t, map[string]int{"hung instance": hung}, survivorTimeout)
}

// TestReliabilityPingLostInstanceIsDown checks the window between the moment the pings
// declare a shared instance dead and the moment its replacement runs. In it the server
// is down: mcp_status must not report the hung process as healthy, and a call must
// fail at once saying the server is down and being restarted (or run on the
// replacement), never be sent to the hung process.
func TestReliabilityPingLostInstanceIsDown(t *testing.T) {
	t.Parallel()
	a, c, hung := relHungShared(t)
	relLogLine(t, a, relRecoverTimeout, `msg="lease lost"`, "server=demo", "pid="+strconv.Itoa(hung))

	st := relStatus(t, c)
	health, _ := st.relHealth("demo")
	if health == "ok" {
		assert.NotEqual(t, hung, st.relSharedPID("demo"),
			"after the pings declared pid %d lost, mcp_status still reports it as the healthy shared instance: %+v", hung, st.Servers)
	}

	o := relCall(c, "demo_echo", map[string]any{"text": "after the loss"}, nil)
	require.NoError(t, o.err)
	if len(o.resp.Error) > 0 {
		msg := relErrorMessage(t, o)
		assert.Contains(t, msg, `server "demo"`)
		assert.Contains(t, msg, "is down", "the error says the server is down and being restarted")
	} else {
		assert.Equal(t, "after the loss", firstText(t, o.resp.Result))
	}
	assert.Less(t, o.elapsed, time.Second, "a call made after the hung instance was declared lost took %s", o.elapsed)
}
