package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The TestCore tests check the proxy core (issue 10) from the outside: session ids,
// limits and timeouts of the downstream transports, memory bounds under hostile
// clients and upstreams, and JSON-RPC validity. The helpers in this file are shared
// by the core_*_test.go files.

// MiB is a mebibyte, for memory bounds.
const MiB = 1 << 20

// coreMemory is one reading of a process's memory from /proc/PID/status.
type coreMemory struct {
	RSS  int64 // VmRSS: resident now
	Peak int64 // VmHWM: the most resident since start, or since coreResetPeak
}

// coreReadMemory reads the resident set of pid.
func coreReadMemory(t testing.TB, pid int) coreMemory {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err, "reading the status of pid %d", pid)
	var m coreMemory
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			m.RSS = kb << 10
		case "VmHWM":
			m.Peak = kb << 10
		}
	}
	require.NotZero(t, m.RSS, "no VmRSS in /proc/%d/status", pid)
	return m
}

// coreResetPeak resets the peak resident set (VmHWM) of pid to its current resident
// set (Linux 4.0 and later), so that a later Peak measures one phase of a test. It
// returns the reading to compare against: after the reset, or, where the kernel does
// not allow the reset, the reading whose Peak already includes everything before.
func coreResetPeak(t testing.TB, pid int) (base coreMemory, reset bool) {
	t.Helper()
	err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	base = coreReadMemory(t, pid)
	if err != nil {
		t.Logf("cannot reset the peak RSS of pid %d (%v); growth is measured against the current RSS", pid, err)
		return base, false
	}
	return base, true
}

// coreGrowth is how far the peak resident set rose above base.RSS since base was read.
func coreGrowth(t testing.TB, pid int, base coreMemory) int64 {
	t.Helper()
	return coreReadMemory(t, pid).Peak - base.RSS
}

// corePID is the pid of the aggregator process itself.
func corePID(a *aggregator) int { return a.cmd.Process.Pid }

// coreHTTPReply is one raw HTTP exchange's outcome.
type coreHTTPReply struct {
	status int
	header http.Header
	body   []byte
}

// corePost sends body to the MCP endpoint with the headers of a session-based client
// (session may be empty) plus extra, and reads the whole reply.
func corePost(t testing.TB, url, session string, body []byte, extra map[string]string) coreHTTPReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return coreDo(t, req)
}

// coreDo sends req on a connection of its own and reads the whole reply.
func coreDo(t testing.TB, req *http.Request) coreHTTPReply {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err, "%s %s", req.Method, req.URL)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "reading the reply to %s %s", req.Method, req.URL)
	return coreHTTPReply{status: resp.StatusCode, header: resp.Header, body: raw}
}

// coreMessage returns the JSON-RPC message of a reply: the JSON body, or the last
// event of an SSE stream.
func coreMessage(t testing.TB, r coreHTTPReply) message {
	t.Helper()
	data := bytes.TrimSpace(r.body)
	if mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); mt == "text/event-stream" {
		var last []byte
		require.NoError(t, readSSE(bytes.NewReader(r.body), func(d []byte) bool { last = d; return true }))
		data = last
	}
	var m message
	require.NoError(t, json.Unmarshal(data, &m), "HTTP %d with a body that is no JSON-RPC message: %.500s", r.status, r.body)
	return m
}

// coreErrorCode returns the code of a JSON-RPC error object, or 0 when raw is none.
func coreErrorCode(raw json.RawMessage) int {
	var e struct {
		Code int `json:"code"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil {
		return 0
	}
	return e.Code
}

// coreSessionOf returns the Mcp-Session-Id of an initialized HTTP client.
func coreSessionOf(t testing.TB, c *client) string {
	t.Helper()
	w, ok := c.wire.(*httpWire)
	require.True(t, ok, "not an HTTP client")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotEmpty(t, w.session, "the initialize response carried no Mcp-Session-Id")
	return w.session
}

// coreCounterValue reads a counter's value through its get tool.
func coreCounterValue(t testing.TB, c *client, tool string) int {
	t.Helper()
	r, err := leaseDecode(c.callToolResult(tool, map[string]any{}))
	require.NoError(t, err)
	require.NotNil(t, r.Value, "no value in %s", r.Raw)
	return *r.Value
}

// corePoll calls check until it reports true or timeout passes; it is for states no
// event announces (a process table, a status report).
func corePoll(timeout, every time.Duration, check func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if check() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every) // polling a state that sends no event
	}
}

// coreReadFirstEvent reads an SSE body up to the first event whose data contains
// want, and leaves the rest unread.
func coreReadFirstEvent(body io.Reader, want string) error {
	r := bufio.NewReader(body)
	for {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "data:") && strings.Contains(line, want) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the stream ended before an event with %q: %w", want, err)
		}
	}
}

// Memory and throughput bounds are measured on an aggregator built without the race
// detector: its shadow memory multiplies every byte the process touches by four or
// more, and its instrumentation the CPU cost of every byte copied, so under -race such
// a bound would measure the detector, not the aggregator. The upstreams stay the
// race-enabled binary, and every other test runs the race-enabled aggregator.
var (
	plainOnce   sync.Once
	plainBinary string
	plainErr    error
)

// corePlainBinary returns an aggregator binary built without -race.
func corePlainBinary(t testing.TB) string {
	t.Helper()
	if !raceEnabled {
		return binary
	}
	plainOnce.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			plainErr = err
			return
		}
		out := filepath.Join(filepath.Dir(binary), "mcp-aggregator-norace")
		build := exec.Command("go", "build", "-o", out, "./cmd/mcp-aggregator")
		build.Dir = root
		if msg, err := build.CombinedOutput(); err != nil {
			plainErr = fmt.Errorf("building the aggregator without -race: %v\n%s", err, msg)
			return
		}
		plainBinary = out
	})
	require.NoError(t, plainErr)
	return plainBinary
}

// coreServePlain serves config like serveConfig, on an aggregator binary whose memory
// and throughput a test may bound (see corePlainBinary).
func coreServePlain(t *testing.T, tr transport, config string) *aggregator {
	t.Helper()
	return startAggregator(t, tr, aggregatorOptions{exe: corePlainBinary(t), configs: []string{writeConfig(t, config)}})
}
