package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connsPerClient is the gateway's default cap on one address's open connections.
const connsPerClient = 256

// TestOpsProbesAnswerOverTheConnectionCap: behind a load balancer every client's
// connection comes from the balancer's address, and so do its health checks. With
// that address at its connection cap (here: 255 sessions, each holding its GET
// stream, and the connection that opened them), /healthz and /readyz from it still
// answer 200, so the balancer does not take a healthy replica out of rotation; /mcp
// and /metrics on a further connection are still refused with 429.
func TestOpsProbesAnswerOverTheConnectionCap(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, demoToolsConfig())
	a.waitLoaded()
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	streams := openStreams(t, a, connsPerClient)

	// The address holds its 256 connections: the probes still answer.
	for _, probe := range []struct{ path, want string }{
		{"/healthz", "ok\n"},
		{"/readyz", `{"ready":true}`},
		{"/readyz?draining=404", `{"ready":true}`},
	} {
		code, _, body := opsGet(t, fresh, opsBase(a)+probe.path)
		require.Equal(t, http.StatusOK, code, "GET %s with the address at its connection cap: %s", probe.path, body)
		if strings.HasPrefix(probe.want, "{") {
			assertJSONEqual(t, []byte(probe.want), body)
		} else {
			assert.Equal(t, probe.want, string(body))
		}
	}
	// Everything else is refused, as before.
	resp, err := opsInitialize(a, fresh)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a new session over the cap: %s", body)
	assert.Contains(t, string(body), "too many connections from this address")
	code, _, body := opsGet(t, fresh, opsBase(a)+"/metrics")
	assert.Equal(t, http.StatusTooManyRequests, code, "/metrics over the cap: %.200s", body)

	// Streams closed, the address is served again.
	for _, c := range streams {
		c.Close()
	}
	fams := opsScrapeEventually(t, a, fresh)
	assert.Equal(t, float64(connsPerClient-1), opsValue(t, fams, "mcp_aggregator_sessions", nil),
		"the sessions stay open without their GET streams")
}

// opsScrapeEventually scrapes /metrics once the gateway has seen closed connections
// go: their slots come back when it notices them closed.
func opsScrapeEventually(t *testing.T, a *aggregator, client *http.Client) map[string]*dto.MetricFamily {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := client.Get(opsBase(a) + "/metrics")
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "/metrics is refused after the streams closed")
	return opsScrape(t, a)
}

// TestOpsConnectionCapFollowsTheFlag: --max-conns-per-address sets the cap of one
// address's connections, for a load balancer that carries more streams than the
// default 256: 300 connections of one address (299 GET streams) are served under a
// cap of 300, the
// next connection is refused, and the log names the flag that raises the cap.
func TestOpsConnectionCapFollowsTheFlag(t *testing.T) {
	t.Parallel()
	const capped = 300
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, demoToolsConfig())},
		flags: []string{"--max-conns-per-address", "300"}})
	a.waitLoaded()
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	openStreams(t, a, capped)
	resp, err := opsInitialize(a, fresh)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a new session over the cap: %s", body)
	assert.Contains(t, string(body), "at most 300")
	relLogLine(t, a, startTimeout, "refused connections over the per-client cap", "max=300", "--max-conns-per-address")

	res := runCLI(t, "serve", "--http", "127.0.0.1:0", "--max-conns-per-address", "-1")
	assert.Equal(t, 2, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stderr, "--max-conns-per-address -1")
}

// opsInitialize sends an initialize on a client of its own.
func opsInitialize(a *aggregator, client *http.Client) (*http.Response, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cap","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, a.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return client.Do(req)
}

// openStreams brings the connections of this test's address to n: n-1 sessions, each
// holding its GET stream on a connection of its own, and the one kept-alive connection
// that initialized them all. They are closed when the test ends.
func openStreams(t *testing.T, a *aggregator, n int) []net.Conn {
	t.Helper()
	base, err := url.Parse(opsBase(a))
	require.NoError(t, err)
	one := &http.Transport{MaxConnsPerHost: 1}
	t.Cleanup(one.CloseIdleConnections)
	client := &http.Client{Transport: one, Timeout: 10 * time.Second}
	streams := make([]net.Conn, 0, n-1)
	t.Cleanup(func() {
		for _, c := range streams {
			c.Close()
		}
	})
	for range n - 1 {
		resp, err := opsInitialize(a, client)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		id := resp.Header.Get("Mcp-Session-Id")
		require.NotEmpty(t, id)

		c, err := net.Dial("tcp", base.Host)
		require.NoError(t, err)
		streams = append(streams, c)
		_, err = fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n", base.Host, id)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		status, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "HTTP/1.1 200 OK\r\n", status, "GET stream %d", len(streams))
	}
	return streams
}
