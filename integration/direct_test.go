package integration

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connectDirect runs an MCP server over stdio without the aggregator in between and
// returns an initialized client for it: what a test compares the aggregator against.
// The server is stopped (stdin closed) when the test ends, and must leave no process.
func connectDirect(t *testing.T, env []string, command string, args ...string) *client {
	t.Helper()
	marker := newMarker()
	log := newLogBuffer()
	cmd := exec.Command(command, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = markerEnv(marker, env...)
	cmd.Stderr = log
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, childOut, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout = childOut
	require.NoError(t, cmd.Start())
	childOut.Close()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	box := newInbox()
	c := &client{t: t, wire: newStdioWire(stdin, stdout, box), inbox: box}
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			t.Errorf("%s did not exit within %s of its stdin closing", command, stopTimeout)
			_ = cmd.Process.Kill()
			<-exited
		}
		stdout.Close()
		assert.Empty(t, box.invalidLines(), "%s wrote lines that are not JSON-RPC messages", command)
		assertNoSurvivors(t, marker)
		if t.Failed() {
			t.Logf("%s stderr:\n%s", command, log)
		}
	})
	// The reference connection declares what the aggregator declares to its
	// upstreams, so that servers that offer tools by client capability
	// offer both the same ones.
	c.initializeWith(upstreamCapabilities)
	return c
}

// upstreamCapabilities are the client capabilities the aggregator declares
// in its initialize to an upstream: those it can relay to its own clients.
var upstreamCapabilities = map[string]any{
	"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
	"roots":       map[string]any{"listChanged": true},
	"sampling":    map[string]any{},
	"extensions":  map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}}},
}
