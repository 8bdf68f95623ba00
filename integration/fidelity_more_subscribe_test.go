package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// updateWait bounds the wait for a notifications/resources/updated:
// server-everything sends one for each subscribed URI every 5 seconds.
const updateWait = 20 * time.Second

// everythingUpdatesURI is a resource of server-everything that a client
// can subscribe to.
const everythingUpdatesURI = "demo://resource/dynamic/text/1"

// sharedEverythingConfig fronts one shared instance of server-everything.
func sharedEverythingConfig(entry string) string {
	return "version: 1\nservers:\n" + everythingYAML("every", entry, statelessServer)
}

// isUpdated matches notifications/resources/updated for uri.
func isUpdated(uri string) func(notification) bool {
	return func(n notification) bool {
		if n.Method != "notifications/resources/updated" {
			return false
		}
		var p struct {
			URI string `json:"uri"`
		}
		return json.Unmarshal(n.Params, &p) == nil && p.URI == uri
	}
}

// updatedAfter waits for an update of uri among the notifications after the
// first skip of them.
func updatedAfter(c *client, skip int, uri string) (notification, bool) {
	seen := 0
	return c.waitNotification(func(n notification) bool {
		seen++
		return seen > skip && isUpdated(uri)(n)
	}, updateWait)
}

// openSessionStream opens the standalone GET stream of c, an initialized
// HTTP session of a, whose notifications go to c's inbox like any other.
func openSessionStream(t *testing.T, a *aggregator, c *client) {
	t.Helper()
	resp := getStream(t, a, c)
	w := c.wire.(*httpWire)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = readSSE(resp.Body, func(data []byte) bool {
			w.inbox.dispatch(data, w.answer)
			return true
		})
	}()
	t.Cleanup(func() { _ = resp.Body.Close(); <-done })
}

// modernListen opens a subscriptions/listen stream under id on c (a stdio
// connection, where the stream's notifications arrive like any other) and
// returns its acknowledgement's params.
func modernListen(t *testing.T, c *client, id int64, filter map[string]any) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_, _ = c.request(ctx, id, "subscriptions/listen", map[string]any{"notifications": filter, "_meta": modernMeta()})
	}()
	ack, ok := c.waitNotification(func(n notification) bool {
		return n.Method == "notifications/subscriptions/acknowledged"
	}, callTimeout)
	require.True(t, ok, "subscriptions/listen was never acknowledged")
	return ack.Params
}

// modernCallTool calls a tool with a sessionless (2026-07-28) request.
func modernCallTool(t *testing.T, c *client, name string) {
	t.Helper()
	resp := c.mustRequest("tools/call", map[string]any{"name": name, "arguments": map[string]any{}, "_meta": modernMeta()})
	require.Empty(t, string(resp.Error), "%s", name)
}

// TestFidelityMoreSharedUnsubscribe: two sessions subscribe to one resource
// of a shared instance. An upstream's subscription is per upstream session,
// so one client's resources/unsubscribe must not end the other's updates:
// directly connected, each would have its own.
func TestFidelityMoreSharedUnsubscribe(t *testing.T) {
	t.Parallel()
	entry := nodeEntry(t, everythingEntry)
	a := serveConfig(t, httpTransport, sharedEverythingConfig(entry))
	a.waitLoaded()
	alice, bob := a.connect(), a.connect()
	for _, c := range []*client{alice, bob} {
		openSessionStream(t, a, c)
		resp := c.mustRequest("resources/subscribe", map[string]any{"uri": everythingUpdatesURI})
		require.Empty(t, string(resp.Error))
		assertJSONEqual(t, []byte(`{}`), resp.Result)
	}
	alice.callToolResult("toggle-subscriber-updates", map[string]any{})
	_, ok := bob.waitNotification(isUpdated(everythingUpdatesURI), updateWait)
	require.True(t, ok, "bob, subscribed, hears of updates")

	resp := alice.mustRequest("resources/unsubscribe", map[string]any{"uri": everythingUpdatesURI})
	require.Empty(t, string(resp.Error))
	assertJSONEqual(t, []byte(`{}`), resp.Result, "unsubscribe answers as the upstream does")
	seen := len(bob.inboxNotes())
	_, ok = updatedAfter(bob, seen, everythingUpdatesURI)
	assert.True(t, ok, "bob, still subscribed, still hears of updates after alice unsubscribed")
	after := len(alice.inboxNotes())
	_, ok = updatedAfter(bob, len(bob.inboxNotes()), everythingUpdatesURI)
	require.True(t, ok)
	for _, n := range alice.inboxNotes()[after:] {
		assert.False(t, isUpdated(everythingUpdatesURI)(n), "alice unsubscribed: %s", n.Params)
	}
}

// TestFidelityMoreListenResourceUpdates: a 2026-07-28 client names a
// resource in its subscriptions/listen filter, in front of a 2025-11-25
// upstream. The acknowledgement grants it, so its updates must arrive, on
// the stream, under the stream's own subscription id.
func TestFidelityMoreListenResourceUpdates(t *testing.T) {
	t.Parallel()
	entry := nodeEntry(t, everythingEntry)
	a := serveConfig(t, stdioTransport, sharedEverythingConfig(entry))
	a.waitLoaded()
	c := a.newClient()
	ack := modernListen(t, c, 900, map[string]any{"resourceSubscriptions": []string{everythingUpdatesURI}})
	assertJSONEqual(t, mustJSON(t, map[string]any{
		"_meta":         map[string]any{"io.modelcontextprotocol/subscriptionId": 900},
		"notifications": map[string]any{"resourceSubscriptions": []string{everythingUpdatesURI}},
	}), ack, "the acknowledgement names the resource whose updates will come")

	modernCallTool(t, c, "toggle-subscriber-updates")
	n, ok := c.waitNotification(isUpdated(everythingUpdatesURI), updateWait)
	require.True(t, ok, "an update of the resource the listen stream named")
	assertJSONEqual(t, mustJSON(t, map[string]any{
		"uri":   everythingUpdatesURI,
		"_meta": map[string]any{"io.modelcontextprotocol/subscriptionId": 900},
	}), n.Params)
}

// modernUpstreamConfig fronts node/inputserver.mjs (protocol 2026-07-28),
// which announces updates of input://note on its own subscriptions/listen
// stream, under the aggregator's subscription id.
func modernUpstreamConfig(url string) string {
	return fmt.Sprintf(`version: 1
servers:
  modern:
    url: %s
    protocol: "2026-07-28"
    truely-stateless: true
`, url)
}

// TestFidelityMoreUpstreamSubscriptionID: the subscription id a 2026-07-28
// upstream puts in an update's _meta is the id of the aggregator's own
// listen stream. A 2025-11-25 session gets the update without it; a
// 2026-07-28 client's listen stream gets it under its own id.
func TestFidelityMoreUpstreamSubscriptionID(t *testing.T) {
	t.Parallel()
	url, serverLog := startInputServer(t)
	const uri = "input://note"

	t.Run("session", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, stdioTransport, modernUpstreamConfig(url))
		a.waitLoaded()
		c := a.connect()
		resp := c.mustRequest("resources/subscribe", map[string]any{"uri": uri})
		require.Empty(t, string(resp.Error), "server log:\n%s", serverLog)
		c.callToolResult("touch_note", map[string]any{})
		n, ok := c.waitNotification(isUpdated(uri), callTimeout)
		require.True(t, ok, "aggregator log:\n%s", a.log)
		assertJSONEqual(t, mustJSON(t, map[string]any{"uri": uri}), n.Params)
	})
	t.Run("listen", func(t *testing.T) {
		t.Parallel()
		a := serveConfig(t, stdioTransport, modernUpstreamConfig(url))
		a.waitLoaded()
		c := a.newClient()
		ack := modernListen(t, c, 77, map[string]any{"resourceSubscriptions": []string{uri}})
		assertJSONEqual(t, mustJSON(t, map[string]any{
			"_meta":         map[string]any{"io.modelcontextprotocol/subscriptionId": 77},
			"notifications": map[string]any{"resourceSubscriptions": []string{uri}},
		}), ack)
		modernCallTool(t, c, "touch_note")
		n, ok := c.waitNotification(isUpdated(uri), callTimeout)
		require.True(t, ok, "aggregator log:\n%s", a.log)
		assertJSONEqual(t, mustJSON(t, map[string]any{
			"uri":   uri,
			"_meta": map[string]any{"io.modelcontextprotocol/subscriptionId": 77},
		}), n.Params)
	})
}
