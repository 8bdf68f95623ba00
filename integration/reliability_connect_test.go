package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relHTTPUpstream is a one-tool streamable-HTTP MCP server run by the test itself.
type relHTTPUpstream struct {
	srv    *http.Server
	served chan error
}

// relStartHTTPUpstream serves it at http://127.0.0.1:port/mcp.
func relStartHTTPUpstream(t *testing.T, port int) *relHTTPUpstream {
	t.Helper()
	s := server.NewMCPServer("reliability-remote", "1.0.0", server.WithToolCapabilities(false))
	addTextTool(s, "hello", "Says hello.", "hello from the late server")
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s))
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err, "the port was taken meanwhile")
	u := &relHTTPUpstream{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, served: make(chan error, 1)}
	go func() { u.served <- u.srv.Serve(ln) }()
	return u
}

// relStop stops the server; nil is a server that never started.
func (u *relHTTPUpstream) relStop(t *testing.T) {
	if u == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = u.srv.Shutdown(ctx)
	if err := <-u.served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("the HTTP upstream failed: %v", err)
	}
}

// TestReliabilityConnectRetried points a streamable-HTTP server at a port where
// nothing listens yet and starts listening only after the first attempt failed:
// connecting is safe to repeat, so the aggregator retries it within connect_timeout.
func TestReliabilityConnectRetried(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
	var up *relHTTPUpstream
	// Registered before the aggregator's cleanup, so it runs after it.
	t.Cleanup(func() { up.relStop(t) })
	a := serveConfig(t, stdioTransport, `version: 1
servers:
  remote:
    truely-stateless: true
    transport: streamable_http
    url: `+quoted(url)+`
    connect_timeout: 20s
    transform: [{prefix: remote_}]
  demo:
    truely-stateless: true
    `+demoServer("tools")+`
    transform: [{prefix: demo_}]
`)
	relLogLine(t, a, startTimeout, `msg="starting server failed; retrying"`, "server=remote", "attempt=1")
	up = relStartHTTPUpstream(t, port)

	a.waitLoaded()
	c := a.connect()
	assert.Equal(t, "hello from the late server", firstText(t, c.callToolResult("remote_hello", map[string]any{})))
	assert.Empty(t, relStatus(t, c).Problems)
	relLogLine(t, a, startTimeout, `msg="server ready"`, "server=remote")
}
