package integration

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeSIGHUPWhileUpstreamsStart: a SIGHUP that arrives while the upstreams still
// start does not end the aggregator; it reloads once the first load is done.
func TestServeSIGHUPWhileUpstreamsStart(t *testing.T) {
	t.Parallel()
	// A server that never answers initialize holds the first load for its
	// connect_timeout.
	a := serveConfig(t, stdioTransport, `version: 1
servers:
  mute:
    command: sleep
    args: ["60"]
    connect_timeout: 2s
`)
	relLogLine(t, a, startTimeout, "msg=config ")
	require.False(t, a.loaded(), "the first load must still be running when SIGHUP is sent")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGHUP))
	relLogLine(t, a, startTimeout, "SIGHUP: reloading config")
	relLogLine(t, a, startTimeout, `msg="reload done"`)
	assert.True(t, a.loaded())
}

// TestServeReloadSaysWhatRunsInstead: a reload whose server definition has errors says
// that the server keeps its last good instance and tools; a new server with errors is
// said not to start.
func TestServeReloadSaysWhatRunsInstead(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, demoToolsConfig())
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{path}})
	a.waitLoaded()
	broken := demoToolsConfig() + "    request_timeout: soon\n  extra:\n    command: [not, a, string]\n"
	require.NoError(t, os.WriteFile(path, []byte(broken), 0o644))
	relLogLine(t, a, startTimeout, `msg="reload done"`)
	assert.True(t, a.log.containsLine("level=WARN", "keeps its last good instance and tools", "server=demo"), "%s", a.log)
	assert.True(t, a.log.containsLine("level=WARN", "is not started until they are fixed", "server=extra"), "%s", a.log)
	assert.True(t, a.log.containsLine("level=ERROR", `server \"demo\": request_timeout`), "%s", a.log)
}

// TestServeRejectedConfigAtStart: a config rejected as a whole at start is said to
// leave the aggregator serving no upstream server until it is fixed.
func TestServeRejectedConfigAtStart(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 2\nservers: {}\n")
	a.waitLoaded()
	assert.True(t, a.log.containsLine("level=ERROR", "config rejected; serving no upstream server until the errors below are fixed"), "%s", a.log)
	assert.True(t, a.log.containsLine("level=ERROR", "version 2 is not supported"), "%s", a.log)
}

// TestServeStdioStopSignal: SIGTERM stops a stdio aggregator with exit status 0 and a
// log line that names the signal, not the client, as the reason.
func TestServeStdioStopSignal(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, demoToolsConfig())
	a.waitLoaded()
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-a.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("the aggregator did not exit within %s of SIGTERM", stopTimeout)
	}
	assert.NoError(t, a.waitErr, "exit status")
	assert.True(t, a.log.containsLine("stop signal: shutting down"), "%s", a.log)
	assert.False(t, a.log.containsLine("downstream closed"), "%s", a.log)
}

// TestServeRefusesABadHTTPAddress: an --http value that is no address is a usage error
// (exit 2) naming the flag, before any upstream starts.
func TestServeRefusesABadHTTPAddress(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demoToolsConfig())
	for _, addr := range []string{"nonsense:::", "localhost:99999"} {
		res := runCLI(t, "serve", "--config", cfg, "--http", addr)
		assert.Equal(t, 2, res.code, "stderr: %s", res.stderr)
		assert.Contains(t, res.stderr, `serve: --http "`+addr+`"`)
		assert.NotContains(t, res.stderr, "non-loopback")
		assert.NotContains(t, res.stderr, "server ready", "nothing starts")
	}
}

// TestToolsLogLevel: tools logs only errors unless --log-level asks for more, and
// refuses a level that is none.
func TestToolsLogLevel(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demoToolsConfig())
	res := runCLI(t, "tools", "--config", cfg, "--log-level", "info")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stdout, "demo_echo")
	assert.Contains(t, res.stderr, `msg="server ready" server=demo`)

	res = runCLI(t, "tools", "--config", cfg)
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.NotContains(t, res.stderr, "level=INFO")

	res = runCLI(t, "tools", "--config", cfg, "--log-level", "loud")
	assert.Equal(t, 2, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stderr, `--log-level "loud"`)
	assert.False(t, strings.Contains(res.stdout, "demo_echo"), "nothing starts")
}

// TestServeAddressInUse: an --http address that is taken stops the start with exit
// status 1 naming the address, before any upstream starts.
func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cfg := writeConfig(t, demoToolsConfig())
	res := runCLI(t, "serve", "--config", cfg, "--http", ln.Addr().String())
	assert.Equal(t, 1, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stderr, `msg="cannot listen" addr=`+ln.Addr().String())
	assert.NotContains(t, res.stderr, "process supervision", "nothing starts")
	assert.NotContains(t, res.stderr, "server=demo", "no upstream starts")
}

// TestServeReloadsOnEnvFileEdit: an edit of the env_file a server names reloads the
// config as an edit of the config does, and the server runs with the new value.
func TestServeReloadsOnEnvFileEdit(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `version: 1
servers:
  demo:
    truely-stateless: true
    `+demoServer("tools")+`
    env_file: app.env
    env: {GREETING: '${GREETING}'}
    transform: [{prefix: demo_}]
`)
	envPath := filepath.Join(filepath.Dir(path), "app.env")
	require.NoError(t, os.WriteFile(envPath, []byte("GREETING=first\n"), 0o600))
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{path}})
	a.waitLoaded()
	relLogLine(t, a, startTimeout, `msg="watching for changes"`, envPath)
	c := a.connect()
	assert.Equal(t, "first", firstText(t, c.callToolResult("demo_env", map[string]any{"name": "GREETING"})))

	require.NoError(t, os.WriteFile(envPath, []byte("GREETING=second\n"), 0o600))
	relLogLine(t, a, startTimeout, "config changed: reloading")
	relLogLine(t, a, startTimeout, `msg="reload done"`)
	assert.Equal(t, "second", firstText(t, c.callToolResult("demo_env", map[string]any{"name": "GREETING"})))
}
