package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reliability tests drive the real binary into the situations the SPEC (§7) names:
// upstreams that crash, hang, flood their stdout or ignore signals, calls that run too
// long or over a limit, and an aggregator that ends in every way it can. The helpers in
// this file are shared by the reliability_*_test.go files.

// relFailFast bounds how long a call that must fail at once may take. It is a bound on
// a failure path (far below the timeouts configured in the same tests), not a benchmark.
const relFailFast = 5 * time.Second

// relOutcome is how one tools/call ended and how long it took.
type relOutcome struct {
	resp    *response
	err     error // a transport failure, not a JSON-RPC error
	elapsed time.Duration
}

// relCall makes a tools/call with optional _meta and measures it. It is safe to call
// from any goroutine: it never ends the test itself.
func relCall(c *client, name string, args any, meta map[string]any) relOutcome {
	params := map[string]any{"name": name, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	start := time.Now()
	resp, err := c.request(ctx, c.newID(), "tools/call", params)
	return relOutcome{resp: resp, err: err, elapsed: time.Since(start)}
}

// relStartCall runs relCall on its own goroutine; the channel delivers its outcome.
func relStartCall(c *client, name string, args any, meta map[string]any) <-chan relOutcome {
	out := make(chan relOutcome, 1)
	go func() { out <- relCall(c, name, args, meta) }()
	return out
}

// relAwait waits for a call started by relStartCall.
func relAwait(t testing.TB, ch <-chan relOutcome) relOutcome {
	t.Helper()
	select {
	case o := <-ch:
		require.NoError(t, o.err, "the call got no JSON-RPC response")
		return o
	case <-time.After(callTimeout + 5*time.Second):
		t.Fatal("the call never returned")
		return relOutcome{}
	}
}

// relErrorMessage requires that a response is a JSON-RPC error and returns its message.
func relErrorMessage(t testing.TB, o relOutcome) string {
	t.Helper()
	require.NoError(t, o.err, "the call got no JSON-RPC response")
	require.NotEmpty(t, o.resp.Error, "expected a JSON-RPC error, got the result %.500s", o.resp.Result)
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(o.resp.Error, &e), "error object %s", o.resp.Error)
	require.NotEmpty(t, e.Message, "the error has no message: %s", o.resp.Error)
	return e.Message
}

// relResult requires that a response is a result and returns it.
func relResult(t testing.TB, o relOutcome) json.RawMessage {
	t.Helper()
	require.NoError(t, o.err, "the call got no JSON-RPC response")
	require.Empty(t, o.resp.Error, "expected a result, got the error %s", o.resp.Error)
	return o.resp.Result
}

// relTexts returns the text of every text item of a tool result.
func relTexts(t testing.TB, result json.RawMessage) []string {
	t.Helper()
	var texts []string
	for _, item := range toolContent(t, result) {
		if item.Type == "text" {
			texts = append(texts, item.Text)
		}
	}
	return texts
}

// relStatusReport is the part of mcp_status these tests read.
type relStatusReport struct {
	Servers []struct {
		ID     string `json:"id"`
		Mode   string `json:"mode"`
		Health string `json:"health"`
		PID    int    `json:"pid"`
	} `json:"servers"`
	Leases []struct {
		Server string `json:"serverId"`
		PID    int    `json:"pid"`
	} `json:"leases"`
	Problems []string `json:"problems"`
}

// relStatus calls mcp_status.
func relStatus(t testing.TB, c *client) relStatusReport {
	t.Helper()
	var st relStatusReport
	text := firstText(t, c.callToolResult("mcp_status", map[string]any{}))
	require.NoError(t, json.Unmarshal([]byte(text), &st), "mcp_status: %s", text)
	return st
}

// relHealth returns the health mcp_status reports for server, and whether it lists it.
func (st relStatusReport) relHealth(server string) (string, bool) {
	for _, s := range st.Servers {
		if s.ID == server {
			return s.Health, true
		}
	}
	return "", false
}

// relSharedPID returns the pid of server's shared instance according to mcp_status.
func (st relStatusReport) relSharedPID(server string) int {
	for _, s := range st.Servers {
		if s.ID == server {
			return s.PID
		}
	}
	return 0
}

// relLeasePID returns the pid of this session's instance of server, 0 if it holds none.
func (st relStatusReport) relLeasePID(server string) int {
	for _, l := range st.Leases {
		if l.Server == server {
			return l.PID
		}
	}
	return 0
}

// relWaitHealth polls mcp_status until server's health satisfies ok. Health changes
// inside the aggregator give no event a client could wait on.
func relWaitHealth(t testing.TB, c *client, server string, ok func(health string) bool, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		health, listed := relStatus(t, c).relHealth(server)
		if listed && ok(health) {
			return health
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %q: health is %q (listed: %v) %s later", server, health, listed, timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling status: there is no event to wait on
	}
}

// relLogLine waits for a log line of the aggregator that contains every one of parts.
func relLogLine(t testing.TB, a *aggregator, timeout time.Duration, parts ...string) string {
	t.Helper()
	line, ok := a.log.waitLine(func(line string) bool { return containsAll(line, parts...) }, timeout, a.exited)
	require.True(t, ok, "no log line containing %q within %s; stderr:\n%s", parts, timeout, a.log)
	return line
}

// relCountLines counts the log lines that contain every one of parts.
func relCountLines(a *aggregator, parts ...string) int {
	n := 0
	for _, line := range strings.Split(a.log.String(), "\n") {
		if containsAll(line, parts...) {
			n++
		}
	}
	return n
}

// relProcStat returns the state letter and parent pid of a process; ok is false when
// it no longer exists.
func relProcStat(pid int) (state byte, ppid int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid ..."; comm may hold anything, so cut after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(string(fields[1]))
	return fields[0][0], ppid, true
}

// relRunning reports whether pid is a process that still runs (a zombie no longer does).
func relRunning(pid int) bool {
	state, _, ok := relProcStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// relWaitGone waits until none of the named processes runs any more.
func relWaitGone(t testing.TB, pids map[string]int, timeout time.Duration) {
	t.Helper()
	relWaitNone(t, pids, timeout, "still running %s after the aggregator ended: %v", func(name string, pid int) (string, bool) {
		return fmt.Sprintf("%s (pid %d)", name, pid), relRunning(pid)
	})
}

// relWaitNone waits until left says of none of the named processes that it
// is left (and how to name it); after timeout it reports those left with
// failure, a format of the timeout and their names.
func relWaitNone(t testing.TB, pids map[string]int, timeout time.Duration, failure string, left func(name string, pid int) (string, bool)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var still []string
		for name, pid := range pids {
			if named, ok := left(name, pid); ok {
				still = append(still, named)
			}
		}
		if len(still) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf(failure, timeout, still)
			return
		}
		time.Sleep(25 * time.Millisecond) // polling the process table: no event to wait on
	}
}

// relReaperPID finds the reaper process of the aggregator whose tree carries marker.
func relReaperPID(t testing.TB, marker string) int {
	t.Helper()
	for _, p := range markedProcesses(t, marker) {
		if strings.HasSuffix(p.cmdline, " _reaper") {
			return p.pid
		}
	}
	require.Failf(t, "no reaper", "no _reaper process among %v", markedProcesses(t, marker))
	return 0
}

// relUpstreamStderr matches the log line of one upstream stderr line and captures it.
func relUpstreamStderr(server string) *regexp.Regexp {
	return regexp.MustCompile(`msg="upstream stderr" server=` + regexp.QuoteMeta(server) + ` line="(.*)"`)
}

// relAssertFast asserts that a call that must fail at once did.
func relAssertFast(t testing.TB, o relOutcome, what string) {
	t.Helper()
	assert.Less(t, o.elapsed, relFailFast, "%s took %s", what, o.elapsed)
}
