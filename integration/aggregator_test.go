package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transport is how a client reaches the aggregator.
type transport string

const (
	stdioTransport transport = "stdio"
	httpTransport  transport = "http"
)

// eachTransport runs test as a parallel subtest per downstream transport.
func eachTransport(t *testing.T, test func(t *testing.T, tr transport)) {
	for _, tr := range []transport{stdioTransport, httpTransport} {
		t.Run(string(tr), func(t *testing.T) {
			t.Parallel()
			test(t, tr)
		})
	}
}

// Bounds of the waits on the aggregator process; only reached when something is broken.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
)

// aggregator is a running "mcp-aggregator serve" process.
type aggregator struct {
	t         *testing.T
	transport transport
	cmd       *exec.Cmd
	log       *logBuffer // its stderr
	marker    string     // marks its process tree (see survivors_test.go)
	exited    chan struct{}
	waitErr   error  // valid after exited
	url       string // the /mcp endpoint, in HTTP mode
	killed    bool   // ended by kill, so no clean exit is expected

	// stdio mode: the pipes of the one downstream connection.
	stdin  *os.File
	stdout *os.File
	stdio  *client // created on first use; there is only one stdio connection
}

// aggregatorOptions say how to start the aggregator.
type aggregatorOptions struct {
	configs []string // --config files
	flags   []string // more "serve" flags
	dir     string   // working directory; a fresh temporary directory when empty
	env     []string // more NAME=value for the aggregator's environment
	exe     string   // the executable; the race-enabled build (binary) when empty
	bare    bool     // no "serve" word: the command line starts with the flags
}

var listeningLine = regexp.MustCompile(`msg=listening url=(https?://\S+/mcp)`)

// startAggregator starts "mcp-aggregator serve" and stops it when the test ends,
// asserting that it exits cleanly and leaves no process behind.
func startAggregator(t *testing.T, tr transport, opts aggregatorOptions) *aggregator {
	t.Helper()
	args := []string{"serve", "--log-level", "debug"}
	if opts.bare {
		args = args[1:]
	}
	for _, c := range opts.configs {
		args = append(args, "--config", c)
	}
	if tr == httpTransport {
		args = append(args, "--http", "127.0.0.1:0")
	}
	args = append(args, opts.flags...)
	a := &aggregator{t: t, transport: tr, log: newLogBuffer(), marker: newMarker(), exited: make(chan struct{})}
	exe := opts.exe
	if exe == "" {
		exe = binary
	}
	a.cmd = exec.Command(exe, args...)
	a.cmd.Dir = opts.dir
	if a.cmd.Dir == "" {
		a.cmd.Dir = t.TempDir()
	}
	a.cmd.Env = markerEnv(a.marker, opts.env...)
	// If the test binary itself dies, the aggregator goes with it (and its
	// reaper then takes the upstreams).
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	a.cmd.Stderr = a.log
	// An upstream that inherited stderr must not keep Wait from returning forever.
	a.cmd.WaitDelay = 5 * time.Second

	var childIn, childOut *os.File
	if tr == stdioTransport {
		var err error
		childIn, a.stdin, err = os.Pipe()
		require.NoError(t, err)
		a.stdout, childOut, err = os.Pipe()
		require.NoError(t, err)
		a.cmd.Stdin, a.cmd.Stdout = childIn, childOut
	}
	require.NoError(t, a.cmd.Start())
	if tr == stdioTransport {
		// The child holds its own copies now.
		childIn.Close()
		childOut.Close()
	}
	go func() {
		a.waitErr = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(a.stop)

	if tr == httpTransport {
		line, ok := a.log.waitLine(listeningLine.MatchString, startTimeout, a.exited)
		require.True(t, ok, "the aggregator never said where it listens; stderr:\n%s", a.log)
		a.url = listeningLine.FindStringSubmatch(line)[1]
	}
	return a
}

// serveConfig writes config to a file of its own and starts the aggregator on it.
func serveConfig(t *testing.T, tr transport, config string) *aggregator {
	t.Helper()
	return startAggregator(t, tr, aggregatorOptions{configs: []string{writeConfig(t, config)}})
}

// writeConfig writes a config file into a fresh temporary directory.
func writeConfig(t testing.TB, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp-aggregator.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o644))
	return path
}

// quoted renders s as a YAML scalar (JSON strings are YAML).
func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// demoServer renders the command and args lines of a demo upstream of the built binary.
func demoServer(args ...string) string {
	list := make([]string, 0, len(args)+1)
	list = append(list, quoted("demo-server"))
	for _, a := range args {
		list = append(list, quoted(a))
	}
	return "command: " + quoted(binary) + "\n    args: [" + strings.Join(list, ", ") + "]"
}

// statelessServer is the setting of a server whose one instance serves every session.
const statelessServer = "truely-stateless: true"

// demoEntry is the config of the server name under servers: the demo server spec, its
// tools prefixed with prefix, and the settings given, one a line (a setting of several
// lines indents the rest as a server's settings are).
func demoEntry(name, prefix, spec string, settings ...string) string {
	return serverEntry(name, prefix, append(settings, demoServer(spec))...)
}

// serverEntry is the config of the server name under servers: the settings
// given, one a line (a setting of several lines indents the rest as a
// server's settings are), and its tools prefixed with prefix.
func serverEntry(name, prefix string, settings ...string) string {
	return serverYAML(name, append(settings, "transform: [{prefix: "+prefix+"}]")...)
}

// serverYAML is the config of the server name under servers: the settings
// given, one a line (a setting of several lines indents the rest as a
// server's settings are).
func serverYAML(name string, settings ...string) string {
	var b strings.Builder
	b.WriteString("  " + name + ":\n")
	for _, line := range settings {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// newClient returns an uninitialized client connected to the aggregator: the stdio
// connection, or a new HTTP session.
func (a *aggregator) newClient() *client {
	a.t.Helper()
	box := newInbox()
	if a.transport == stdioTransport {
		require.Nil(a.t, a.stdio, "a stdio aggregator serves exactly one connection")
		a.stdio = &client{t: a.t, wire: newStdioWire(a.stdin, a.stdout, box), inbox: box}
		return a.stdio
	}
	c := &client{t: a.t, wire: newHTTPWire(a.url, box), inbox: box}
	a.t.Cleanup(func() {
		assert.NoError(a.t, c.wire.close(), "closing the HTTP session")
	})
	return c
}

// connect returns an initialized client.
func (a *aggregator) connect() *client {
	a.t.Helper()
	c := a.newClient()
	c.initialize()
	return c
}

// waitLoaded waits until the aggregator has loaded its config and started (or given up
// on) every upstream, which it announces with the list of exported tools.
func (a *aggregator) waitLoaded() {
	a.t.Helper()
	_, ok := a.log.waitLine(func(line string) bool {
		return strings.Contains(line, `msg="exporting tools"`)
	}, startTimeout, a.exited)
	require.True(a.t, ok, "the aggregator never finished loading its config; stderr:\n%s", a.log)
}

// loaded reports whether the aggregator has finished loading its config.
func (a *aggregator) loaded() bool {
	return a.log.containsLine(`msg="exporting tools"`)
}

// kill ends the aggregator with SIGKILL, giving it no chance to close its upstreams.
func (a *aggregator) kill() {
	a.t.Helper()
	require.NoError(a.t, a.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-a.exited:
	case <-time.After(stopTimeout):
		a.t.Fatalf("the aggregator did not die within %s of SIGKILL", stopTimeout)
	}
	a.killed = true
}

// stop ends the aggregator the way its client would (stdio: close stdin; HTTP:
// SIGTERM), then asserts a clean exit and that no process of its tree survived.
func (a *aggregator) stop() {
	t := a.t
	switch a.transport {
	case stdioTransport:
		_ = a.stdin.Close()
	case httpTransport:
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-a.exited:
		if a.killed {
			break
		}
		var exitErr *exec.ExitError
		if errors.As(a.waitErr, &exitErr) {
			t.Errorf("the aggregator exited with status %d", exitErr.ExitCode())
		} else {
			assert.NoError(t, a.waitErr, "waiting for the aggregator")
		}
	case <-time.After(stopTimeout):
		t.Errorf("the aggregator did not exit within %s of its downstream closing", stopTimeout)
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	if a.stdio != nil {
		select {
		case <-a.stdio.wire.(*stdioWire).done: // stdout closes once nothing holds it open
		case <-time.After(stopTimeout):
			t.Errorf("the aggregator's stdout is still open %s after it exited: a process it started inherited it", stopTimeout)
		}
		assert.Empty(t, a.stdio.inbox.invalidLines(), "stdout carried lines that are not JSON-RPC messages")
	}
	if a.stdout != nil {
		a.stdout.Close()
	}
	assertNoSurvivors(t, a.marker)
	if t.Failed() {
		t.Logf("aggregator stderr:\n%s", a.log)
	}
}
