package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTPUpstreamDownLogsItsStreamOnce: while an HTTP upstream is down, the
// GET stream of each of its instances is tried again every second; the log
// says so once, not once a try, so that a server left down for an hour does
// not write thousands of lines per instance.
func TestHTTPUpstreamDownLogsItsStreamOnce(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	kill := everythingOn(t, "streamableHttp", port)
	target, err := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
	require.NoError(t, err)
	// A relay in front of the upstream counts the GET streams asked of it:
	// once the upstream is gone it answers each with 502.
	var gets atomic.Int64
	relay := httputil.NewSingleHostReverseProxy(target)
	relay.ErrorLog = nil
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		relay.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
servers:
  ev:
    truely-stateless: true
    url: %s/mcp
    tools: {whitelist: [echo]}
`, front.URL))
	a.waitLoaded()
	c := a.connect()
	assert.Equal(t, "Echo: up", firstText(t, c.callToolResult("echo", map[string]any{"message": "up"})))

	kill()
	_, ok := a.log.waitLine(func(line string) bool {
		return streamReport(line)
	}, 10*time.Second, nil)
	require.True(t, ok, "the failing GET stream was never reported:\n%s", a.log)
	seen := gets.Load()
	const retries = 4
	require.Eventually(t, func() bool { return gets.Load() >= seen+retries }, 15*time.Second, 50*time.Millisecond,
		"the GET stream is not tried again every second")

	reports := 0
	for _, line := range strings.Split(a.log.String(), "\n") {
		if streamReport(line) {
			reports++
		}
	}
	assert.Equal(t, 1, reports, "%d more tries of the GET stream were each logged:\n%s", retries, a.log)
}

// streamReport reports whether line says the GET stream of server ev failed:
// mcp-go's own line, or the aggregator's.
func streamReport(line string) bool {
	return strings.Contains(line, "server=ev") &&
		(strings.Contains(line, "failed to listen to server") || strings.Contains(line, "GET stream failed"))
}
