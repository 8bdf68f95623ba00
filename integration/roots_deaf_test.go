package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRootsChangedPastAnUpstreamThatStopsReading: a stdio client's
// notifications/roots/list_changed go to every instance it leases; one of
// them stops reading its stdin, so what is written to it fills the pipe.
// The client's calls to its other server are still answered, and that
// server still hears of the roots changing (it asks roots/list when told).
func TestRootsChangedPastAnUpstreamThatStopsReading(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, fmt.Sprintf(`version: 1
servers:
  deaf:
    %s
  surface:
    %s
`, demoServer("misbehave", "deaf-after-call"), demoServer("surface")))
	a.waitLoaded()
	c := a.newClient()
	asked := make(chan struct{}, 1)
	c.inbox.onRequest = func(method string, _ json.RawMessage) (string, string) {
		if method != "roots/list" {
			return "", `{"code":-32601,"message":"not implemented"}`
		}
		select {
		case asked <- struct{}{}:
		default:
		}
		return `{"roots":[{"uri":"file:///work"}]}`, ""
	}
	c.initializeWith(map[string]any{"roots": map[string]any{"listChanged": true}})
	// Both instances are leased to the client; then deaf reads no more.
	require.Contains(t, firstText(t, c.callToolResult("ping_tool", map[string]any{})), "pong")
	_, ok := a.log.waitLine(func(line string) bool { return containsAll(line, "deaf-after-call: no longer reading stdin") }, callTimeout, a.exited)
	require.True(t, ok, "deaf never stopped reading; stderr:\n%s", a.log)
	c.callToolResult("levels", map[string]any{})

	// Far more than deaf's stdin pipe holds. Sent on a goroutine: an
	// aggregator that stopped reading its own stdin would block the sender.
	sent := make(chan error, 1)
	go func() {
		for range 3000 {
			if err := c.notify("notifications/roots/list_changed", nil); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case err := <-sent:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the aggregator stopped reading the client's notifications")
	}
	resp, err := c.request(ctx, c.newID(), "tools/call", map[string]any{"name": "levels", "arguments": map[string]any{}})
	require.NoError(t, err, "a call to another server after the notifications is answered")
	require.Empty(t, string(resp.Error))

	// Drain what the flood caused, then one more change reaches surface.
	for len(asked) > 0 {
		<-asked
	}
	require.NoError(t, c.notify("notifications/roots/list_changed", nil))
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("surface was not told that the roots changed")
	}
	resp, err = c.request(ctx, c.newID(), "tools/call", map[string]any{"name": "levels", "arguments": map[string]any{}})
	require.NoError(t, err)
	require.Empty(t, string(resp.Error))
}
