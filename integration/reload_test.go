package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reloadWait bounds the wait for a reload and its notification; an edit
// normally shows within a second, the bound only matters when it is broken.
const reloadWait = 10 * time.Second

// reloadRig is an aggregator serving a config file that the test edits, and
// one client watching for tools/list_changed.
type reloadRig struct {
	t    *testing.T
	a    *aggregator
	c    *client
	path string
	seen int // "reload done" lines already accounted for
}

func newReloadRig(t *testing.T, tr transport, config string) *reloadRig {
	t.Helper()
	path := writeConfig(t, config)
	a := startAggregator(t, tr, aggregatorOptions{configs: []string{path}})
	a.waitLoaded()
	c := a.connect()
	if tr == httpTransport {
		listen(t, a, c)
	}
	return &reloadRig{t: t, a: a, c: c, path: path}
}

// listen opens the session's GET stream, where an HTTP client receives
// notifications that belong to no request, and feeds it to the client's inbox.
func listen(t *testing.T, a *aggregator, c *client) {
	t.Helper()
	resp := getStream(t, a, c)
	go func() {
		defer resp.Body.Close()
		_ = readSSE(resp.Body, func(data []byte) bool {
			c.wire.(*httpWire).inbox.dispatch(data, nil)
			return true
		})
	}()
}

// getStream opens the session's standalone GET stream with the client's
// own HTTP client (and so its credentials); the stream ends with the test.
func getStream(t *testing.T, a *aggregator, c *client) *http.Response {
	t.Helper()
	return getStreamAt(t, c, a.url)
}

// getStreamAt is getStream at the endpoint url (a view's, say).
func getStreamAt(t *testing.T, c *client, url string) *http.Response {
	t.Helper()
	w := c.wire.(*httpWire)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	w.mu.Lock()
	req.Header.Set("Mcp-Session-Id", w.session)
	req.Header.Set("MCP-Protocol-Version", w.protocol)
	w.mu.Unlock()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := w.hc.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET stream")
	return resp
}

// save replaces the config the way editors do: write a temporary file in the
// same directory, then rename it over the original.
func (r *reloadRig) save(config string) {
	r.t.Helper()
	tmp := filepath.Join(filepath.Dir(r.path), ".mcp-aggregator.yaml.tmp")
	require.NoError(r.t, os.WriteFile(tmp, []byte(config), 0o644))
	require.NoError(r.t, os.Rename(tmp, r.path))
}

// waitReload waits for the next "reload done" log line and returns it.
func (r *reloadRig) waitReload() string {
	r.t.Helper()
	return r.waitReloadWithin(reloadWait)
}

// waitReloadWithin is waitReload waiting at most wait.
func (r *reloadRig) waitReloadWithin(wait time.Duration) string {
	r.t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		r.a.log.mu.Lock()
		text, changed := r.a.log.buf.String(), r.a.log.changed
		r.a.log.mu.Unlock()
		var done []string
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, `msg="reload done"`) {
				done = append(done, line)
			}
		}
		if len(done) > r.seen {
			r.seen = len(done)
			return done[len(done)-1]
		}
		select {
		case <-changed:
		case <-deadline.C:
			r.t.Fatalf("no reload within %s; stderr:\n%s", wait, r.a.log)
		case <-r.a.exited:
			r.t.Fatalf("the aggregator exited; stderr:\n%s", r.a.log)
		}
	}
}

// listChanged counts the tools/list_changed notifications received so far.
func (r *reloadRig) listChanged() int {
	notes, _ := r.c.inbox.snapshot()
	n := 0
	for _, note := range notes {
		if note.Method == "notifications/tools/list_changed" {
			n++
		}
	}
	return n
}

// expectNotified waits until want list_changed notifications have arrived in all.
func (r *reloadRig) expectNotified(want int) {
	r.t.Helper()
	count := 0
	_, ok := r.c.waitNotification(func(n notification) bool {
		if n.Method == "notifications/tools/list_changed" {
			count++
		}
		return count >= want
	}, reloadWait)
	require.True(r.t, ok, "expected %d tools/list_changed notifications in all, got %d", want, r.listChanged())
}

// settle proves that no further notification is on its way: an identical
// rewrite reloads without changing anything, and by the time it is done and
// a request has made a round trip, an earlier notification would have arrived.
func (r *reloadRig) settle(config string) {
	r.t.Helper()
	r.save(config)
	line := r.waitReload()
	assert.Contains(r.t, line, "changed=false", "an identical rewrite changed the catalog")
	r.c.listTools()
}

func (r *reloadRig) names() []string {
	r.t.Helper()
	return toolNames(r.t, r.c.listTools())
}

// pid asks a demo server for its process id through a tool that returns it.
func (r *reloadRig) pid(tool string) int {
	r.t.Helper()
	var res struct {
		Structured struct {
			PID int `json:"pid"`
		} `json:"structuredContent"`
	}
	require.NoError(r.t, json.Unmarshal(r.c.callToolResult(tool, map[string]any{}), &res))
	require.NotZero(r.t, res.Structured.PID)
	return res.Structured.PID
}

func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// waitGone waits until a process no longer exists.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(reloadWait)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs %s later", pid, reloadWait)
		}
		time.Sleep(20 * time.Millisecond) // polling a process table: no event to wait on
	}
}

// reloadConfig renders a config with a shared demo server "demo" exporting the
// listed tools, and optional extra server blocks.
func reloadConfig(whitelist string, extra ...string) string {
	return fmt.Sprintf(`version: 1
servers:
  demo:
    truely-stateless: true
    %s
    tools: {whitelist: [%s]}
`, demoServer("tools"), whitelist) + strings.Join(extra, "")
}

func counterBlock(env string) string {
	return fmt.Sprintf(`  counter:
    truely-stateless: true
    %s
    env: {MARK: %q}
    transform: [{prefix: c_}]
`, demoServer("counter"), env)
}

func TestReloadFilterEdit(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("echo, pid")
		r := newReloadRig(t, tr, base)
		pid := r.pid("pid")
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "pid"}, r.names())

		next := reloadConfig("echo, pid, add")
		r.save(next)
		assert.Contains(t, r.waitReload(), "changed=true")
		r.expectNotified(1)
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "pid", "add"}, r.names())
		assert.Equal(t, pid, r.pid("pid"), "a filter edit must not restart the server")
		r.settle(next)
		assert.Equal(t, 1, r.listChanged(), "exactly one tools/list_changed per effective change")
	})
}

func TestReloadAddChangeRemoveServer(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("pid")
		r := newReloadRig(t, tr, base)
		demoPID := r.pid("pid")

		// Add a server.
		withCounter := reloadConfig("pid", counterBlock("one"))
		r.save(withCounter)
		r.waitReload()
		r.expectNotified(1)
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "pid", "c_get", "c_increment", "c_pid"}, r.names())
		counterPID := r.pid("c_pid")
		assert.Equal(t, demoPID, r.pid("pid"), "an unchanged server keeps its process")

		// Change it in a way that needs a new process but exports the same tools:
		// a new process, and no notification since the catalog is the same.
		changed := reloadConfig("pid", counterBlock("two"))
		r.save(changed)
		assert.Contains(t, r.waitReload(), "changed=false")
		newCounterPID := r.pid("c_pid")
		assert.NotEqual(t, counterPID, newCounterPID, "a changed server runs a new process")
		waitGone(t, counterPID)
		assert.Equal(t, demoPID, r.pid("pid"))

		// Remove it.
		r.save(base)
		r.waitReload()
		r.expectNotified(2)
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "pid"}, r.names())
		waitGone(t, newCounterPID)
		r.settle(base)
		assert.Equal(t, 2, r.listChanged())
	})
}

func TestReloadBrokenYAMLKeepsLastGood(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("echo, pid")
		r := newReloadRig(t, tr, base)
		pid := r.pid("pid")
		r.save("version: 1\nservers: [this is: not: valid\n")
		line := r.waitReload()
		assert.Contains(t, line, "changed=false")
		assert.True(t, r.a.log.containsLine("config rejected; keeping the last good config"))
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "echo", "pid"}, r.names())
		assert.Equal(t, pid, r.pid("pid"))
		r.settle(base)
		assert.Zero(t, r.listChanged(), "a failed reload must not notify")
	})
}

func TestReloadBrokenServerWhileAnotherChanges(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("pid", counterBlock("one"))
		r := newReloadRig(t, tr, base)
		counterPID := r.pid("c_pid")

		// counter now needs a host variable that is not set; demo's filter changes.
		broken := reloadConfig("pid, echo", strings.Replace(counterBlock("one"), `MARK: "one"`, `MARK: {env: MCPAGG_TEST_UNSET_VARIABLE}`, 1))
		r.save(broken)
		r.waitReload()
		r.expectNotified(1)
		assert.True(t, r.a.log.containsLine("counter", "MCPAGG_TEST_UNSET_VARIABLE"), "the problem names the server and the variable")
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "pid", "echo", "c_get", "c_increment", "c_pid"}, r.names(),
			"the broken server keeps its last good tools while the other server's change commits")
		assert.Equal(t, counterPID, r.pid("c_pid"), "the broken server keeps its last good instance")
		r.settle(broken)
		assert.Equal(t, 1, r.listChanged())
	})
}

func TestReloadInPlaceWriteAndDelete(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("pid")
		r := newReloadRig(t, tr, base)
		pid := r.pid("pid")

		// An in-place write (no rename) is seen too.
		require.NoError(t, os.WriteFile(r.path, []byte(reloadConfig("pid, echo")), 0o644))
		r.waitReload()
		r.expectNotified(1)
		assert.Contains(t, r.names(), "echo")

		// Deleting the file means an empty config: every server goes.
		require.NoError(t, os.Remove(r.path))
		r.waitReload()
		r.expectNotified(2)
		assert.ElementsMatch(t, []string{"mcp_release", "mcp_status"}, r.names())
		waitGone(t, pid)
	})
}

func TestReloadOnSIGHUP(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		base := reloadConfig("pid")
		r := newReloadRig(t, tr, base)
		pid := r.pid("pid")
		require.NoError(t, r.a.cmd.Process.Signal(syscall.SIGHUP))
		assert.Contains(t, r.waitReload(), "changed=false")
		assert.True(t, r.a.log.containsLine("SIGHUP: reloading config"))
		r.c.listTools()
		assert.Zero(t, r.listChanged(), "a reload that changes nothing must not notify")
		assert.Equal(t, pid, r.pid("pid"))
	})
}

func TestReloadUpstreamAddsTool(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		r := newReloadRig(t, tr, fmt.Sprintf(`version: 1
servers:
  fid:
    truely-stateless: true
    %s
    transform: [{prefix: f_}]
`, demoServer("fidelity")))
		assert.NotContains(t, r.names(), "f_added_1")
		r.c.callToolResult("f_add_tool", map[string]any{})
		r.expectNotified(1)
		assert.Contains(t, r.names(), "f_added_1", "the aggregator re-listed the server after its list_changed")
	})
}

func TestReloadRemovedServerFinishesInFlightCall(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		with := reloadConfig("pid", counterBlock("x"), fmt.Sprintf(`  slowpoke:
    truely-stateless: true
    %s
    tools: {whitelist: [slow]}
`, demoServer("tools")))
		r := newReloadRig(t, tr, with)
		result := make(chan *response, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			resp, err := r.c.request(ctx, r.c.newID(), "tools/call", map[string]any{
				"name": "slow", "arguments": map[string]any{"seconds": 1.5, "steps": 3},
				"_meta": map[string]any{"progressToken": "inflight"},
			})
			if err != nil {
				resp = &response{Error: json.RawMessage(fmt.Sprintf("%q", err.Error()))}
			}
			result <- resp
		}()
		// The call is in flight once its first progress arrives.
		_, ok := r.c.waitNotification(func(n notification) bool { return n.Method == "notifications/progress" }, reloadWait)
		require.True(t, ok, "no progress from the slow call")
		r.save(reloadConfig("pid", counterBlock("x")))
		r.waitReload()
		assert.NotContains(t, r.names(), "slow", "the removed server takes no new calls")
		select {
		case resp := <-result:
			require.Empty(t, resp.Error, "the in-flight call failed: %s", resp.Error)
			assert.Equal(t, "done after 3 steps", firstText(t, resp.Result))
		case <-time.After(reloadWait):
			t.Fatal("the in-flight call never completed")
		}
	})
}

// TestReloadSoak reloads 100 times while 16 callers call without pause; no
// call may be lost.
func TestReloadSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	configs := []string{
		reloadConfig("echo, pid"),
		reloadConfig("echo, add"),
		reloadConfig("echo, pid", counterBlock("a")),
		reloadConfig("echo", counterBlock("b")),
	}
	r := newReloadRig(t, httpTransport, configs[0])
	callers := make([]*client, 16)
	for i := range callers {
		callers[i] = r.a.connect()
	}
	load := startCallLoad(callers, func(c *client, i, n int) (relOutcome, string) {
		text := fmt.Sprintf("caller %d call %d", i, n)
		return relCall(c, "echo", map[string]any{"text": text}, nil), text
	})
	for i := 1; i <= 100; i++ {
		r.save(configs[i%len(configs)])
		r.waitReload()
	}
	calls, failures := load.finish()
	t.Logf("%d calls during 100 reloads", calls)
	assert.Empty(t, failures, "calls lost during reloads")
	assert.Greater(t, calls, 100)
}

// callLoad keeps clients calling without pause until finish.
type callLoad struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	calls    int
	failures []string
}

// startCallLoad has each of callers call without pause: the n-th call of
// caller i is call(c, i, n), which makes it and returns its outcome and the
// text its result must hold.
func startCallLoad(callers []*client, call func(c *client, i, n int) (relOutcome, string)) *callLoad {
	l := &callLoad{stop: make(chan struct{})}
	for i, c := range callers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				failure := callFailure(call(c, i, n))
				l.mu.Lock()
				l.calls++
				if failure != "" {
					l.failures = append(l.failures, failure)
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// finish stops the callers and returns how many calls they made and how
// those that failed failed.
func (l *callLoad) finish() (int, []string) {
	close(l.stop)
	l.wg.Wait()
	return l.calls, l.failures
}

// callFailure says how o is not a result whose first text is text; "" when
// it is one.
func callFailure(o relOutcome, text string) string {
	switch {
	case o.err != nil:
		return o.err.Error()
	case len(o.resp.Error) > 0:
		return string(o.resp.Error)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(o.resp.Result, &res) != nil || len(res.Content) == 0 || res.Content[0].Text != text {
		return "wrong result: " + string(o.resp.Result)
	}
	return ""
}

// TestReloadWhileAnUpstreamIsSlowToRelist: an upstream that announces a tools change and
// then never answers the tools/list it caused holds up no reload (of its own server or
// another), and no shutdown: the aggregator asks it without holding the reload lock, and
// stops within the shutdown bound (the harness asserts a clean exit in time).
func TestReloadWhileAnUpstreamIsSlowToRelist(t *testing.T) {
	t.Parallel()
	config := func(extra string) string {
		return `version: 1
servers:
  slow:
    truely-stateless: true
    connect_timeout: 10m
    ` + demoServer("misbehave", "slow-relist") + `
    transform: [{prefix: slow_}]
  demo:
    truely-stateless: true
    ` + demoServer("tools") + `
    transform: [{prefix: demo_}]
    tools: {whitelist: [echo` + extra + `]}
`
	}
	r := newReloadRig(t, stdioTransport, config(""))
	// The call makes the upstream announce a change; the re-list it causes
	// never gets an answer.
	assert.Equal(t, "pong", firstText(t, r.c.callToolResult("slow_ping_tool", map[string]any{})))
	require.Eventually(t, func() bool { return r.a.log.containsLine("slow-relist: not answering tools/list") },
		reloadWait, 10*time.Millisecond, "the upstream was never asked to re-list")

	r.save(config(", add"))
	r.waitReload()
	assert.Contains(t, r.names(), "demo_add", "the reload went through while the re-list waits")
}
