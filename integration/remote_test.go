package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveHTTP serves h on a loopback port until the test ends (shut down then,
// after the cleanups registered later) and returns its base URL,
// "http://127.0.0.1:PORT".
func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// remoteEverything runs server-everything as a network server ("streamableHttp"
// or "sse") on a free loopback port and returns its base URL.
func remoteEverything(t *testing.T, mode string) string {
	t.Helper()
	port := freePort(t)
	everythingOn(t, mode, port)
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// addTextTool adds to s the tool name, described as description, whose
// every call answers text.
func addTextTool(s *server.MCPServer, name, description, text string) {
	s.AddTool(mcp.NewTool(name, mcp.WithDescription(description)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(text), nil
		})
}

// freePort is a loopback port no one listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}

// everythingOn runs server-everything in mode on port until the test ends or
// kill is called, which returns once it has exited.
func everythingOn(t *testing.T, mode string, port int) (kill func()) {
	t.Helper()
	cmd := exec.Command("node", nodeEntry(t, "@modelcontextprotocol/server-everything/dist/index.js"), mode)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	log, exited := startProcessGroup(t, cmd)
	_, ok := log.waitLine(func(line string) bool { return strings.Contains(line, fmt.Sprint(port)) }, startTimeout, exited)
	require.True(t, ok, "server-everything (%s) never said it listens on %d:\n%s", mode, port, log)
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// TestHTTPUpstreamThatForgetsTheSession: an HTTP upstream restarted in place
// no longer knows the aggregator's session (server-everything answers it
// with a 400 about the session, not the specification's 404). The aggregator
// connects again after its first backoff, well inside the two 30 s ping
// intervals that would otherwise notice: at once when a call learns it, and
// through the GET stream, which asks again every second, when nothing is
// called.
func TestHTTPUpstreamThatForgetsTheSession(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	kill := everythingOn(t, "streamableHttp", port)
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  ev:
    truely-stateless: true
    url: http://127.0.0.1:%d/mcp
    tools: {whitelist: [echo]}
`, port))
	a.waitLoaded()
	c := a.connect()
	assert.Equal(t, "Echo: before", firstText(t, c.callToolResult("echo", map[string]any{"message": "before"})))

	// waitLogged waits for a line of the aggregator's log written at or after
	// since and containing every one of parts.
	waitLogged := func(since time.Time, parts ...string) string {
		t.Helper()
		line, ok := a.log.waitLine(func(line string) bool {
			stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			return err == nil && !at.Before(since.Truncate(time.Millisecond)) && containsAll(line, parts...)
		}, 10*time.Second, nil)
		require.True(t, ok, "no log line with %q within 10 s", parts)
		return line
	}

	// A call learns it.
	kill()
	restarted := time.Now()
	kill = everythingOn(t, "streamableHttp", port)
	first := c.callTool("echo", map[string]any{"message": "first"})
	require.NotNil(t, first.Error, "the old session cannot have served it")
	assert.Contains(t, string(first.Error), "no longer knows the session")
	waitLogged(restarted, `msg="lease lost" server=ev`, "no longer knows the session")
	waitLogged(restarted, `msg="lease restarted" server=ev`)
	assert.Equal(t, "Echo: after", firstText(t, c.callToolResult("echo", map[string]any{"message": "after"})))

	// Nothing is called: the GET stream learns it.
	kill()
	restarted = time.Now()
	everythingOn(t, "streamableHttp", port)
	waitLogged(restarted, `msg="lease lost" server=ev`, "no longer knows the session (HTTP 400 to the GET stream)")
	waitLogged(restarted, `msg="lease restarted" server=ev`)
	assert.Equal(t, "Echo: idle", firstText(t, c.callToolResult("echo", map[string]any{"message": "idle"})))
}

// startProcessGroup starts cmd in a process group of its own, with its
// output in the returned buffer, and kills the whole group when the test
// ends; the channel is closed once cmd has exited.
func startProcessGroup(t *testing.T, cmd *exec.Cmd) (*logBuffer, <-chan struct{}) {
	t.Helper()
	log := newLogBuffer()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return log, exited
}

// TestRemoteUpstreams puts server-everything behind the aggregator over
// streamable HTTP and over SSE, a shared and a leased upstream each, and
// compares what the client gets with what the upstream answers.
func TestRemoteUpstreams(t *testing.T) {
	t.Parallel()
	httpBase := remoteEverything(t, "streamableHttp")
	sseBase := remoteEverything(t, "sse")
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  evh:
    truely-stateless: true
    url: %s/mcp
    transform: [{prefix: h_}]
    tools: {whitelist: [echo, get-sum]}
  evs:
    truely-stateless: true
    transport: sse
    url: %s/sse
    transform: [{prefix: s_}]
    tools: {whitelist: [echo, get-sum]}
  evl:
    url: %s/mcp
    transform: [{prefix: l_}]
    tools: {whitelist: [echo]}
`, httpBase, sseBase, httpBase))
	a.waitLoaded()
	c := a.connect()
	assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "h_echo", "h_get-sum", "s_echo", "s_get-sum", "l_echo"},
		toolNames(t, c.listTools()))

	for _, prefix := range []string{"h_", "s_"} {
		assert.Equal(t, "Echo: hi "+prefix, firstText(t, c.callToolResult(prefix+"echo", map[string]any{"message": "hi " + prefix})))
		assert.Equal(t, "The sum of 2 and 3 is 5.", firstText(t, c.callToolResult(prefix+"get-sum", map[string]any{"a": 2, "b": 3})))
	}
	// A stateful remote server gets its own upstream session for this session.
	leased := c.callToolResult("l_echo", map[string]any{"message": "leased"})
	assert.Equal(t, "Echo: leased", firstText(t, leased))
	assert.Contains(t, string(leased), "mcp_release", "the first leased result carries the reminder")
}

// TestHTTPRejectsDNSRebinding: a request that reaches the loopback listener
// under a foreign Host name is refused, so a web page cannot drive a local
// aggregator through DNS rebinding.
func TestHTTPRejectsDNSRebinding(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, "version: 1\nservers: {}\n")
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	send := func(host string) int {
		req, err := http.NewRequest(http.MethodPost, a.url, bytes.NewReader(body))
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		hc := &http.Client{Timeout: 10 * time.Second}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusForbidden, send("attacker.example"))
	assert.Equal(t, http.StatusOK, send(strings.TrimPrefix(strings.TrimSuffix(a.url, "/mcp"), "http://")))
}

// TestHTTPUpstreamListChanged: a streamable-HTTP upstream that gains a tool
// outside any request tells the aggregator on its GET stream; the aggregator
// re-lists it and tells its own client.
func TestHTTPUpstreamListChanged(t *testing.T) {
	t.Parallel()
	up := server.NewMCPServer("growing", "1.0.0", server.WithToolCapabilities(true))
	addTextTool(up, "alpha", "The first tool.", "alpha")
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(up))
	// Served (and shut down at cleanup) before the aggregator starts, so its
	// cleanup runs after the aggregator's.
	base := serveHTTP(t, mux)

	r := newReloadRig(t, stdioTransport, fmt.Sprintf(`version: 1
servers:
  grow:
    truely-stateless: true
    url: %s/mcp
    transform: [{prefix: g_}]
`, base))
	assert.Contains(t, r.names(), "g_alpha")

	// The aggregator's upstream session opens its GET stream right after
	// initialize; wait until the upstream knows a session to notify.
	require.Eventually(t, func() bool {
		addTextTool(up, "beta", "Added at run time.", "beta")
		return r.listChanged() > 0
	}, reloadWait, 200*time.Millisecond, "no tools/list_changed reached the client")
	assert.Contains(t, r.names(), "g_beta", "the aggregator re-listed the upstream")
	assert.Equal(t, "beta", firstText(t, r.c.callToolResult("g_beta", map[string]any{})))
}
