package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isUnsubscribeLog matches server-everything's log of a
// resources/unsubscribe of uri it received.
func isUnsubscribeLog(uri string) func(notification) bool {
	return func(n notification) bool {
		if n.Method != "notifications/message" {
			return false
		}
		var p struct {
			Data string `json:"data"`
		}
		return json.Unmarshal(n.Params, &p) == nil &&
			strings.HasPrefix(p.Data, "Received Unsubscribe Resource request: "+uri)
	}
}

// TestSubscriptionReleasedWhenLastSessionEnds: sessions that subscribed to a
// resource of a shared instance end without unsubscribing. While one of
// them remains, the upstream keeps the subscription; when the last ends,
// the aggregator unsubscribes the instance, as the client would have had
// it been connected directly, instead of leaving the upstream sending
// updates no one hears for as long as it runs. server-everything logs each
// resources/unsubscribe it receives, and a log made outside any request
// goes to every session that asked for logs: an observer sees it.
func TestSubscriptionReleasedWhenLastSessionEnds(t *testing.T) {
	t.Parallel()
	entry := nodeEntry(t, everythingEntry)
	a := serveConfig(t, httpTransport, sharedEverythingConfig(entry))
	a.waitLoaded()
	observer := a.connect()
	openSessionStream(t, a, observer)
	require.Empty(t, string(observer.mustRequest("logging/setLevel", map[string]any{"level": "info"}).Error))

	alice, bob := a.connect(), a.connect()
	for _, c := range []*client{alice, bob} {
		resp := c.mustRequest("resources/subscribe", map[string]any{"uri": everythingUpdatesURI})
		require.Empty(t, string(resp.Error))
	}

	openSessionStream(t, a, bob)
	bob.callToolResult("toggle-subscriber-updates", map[string]any{})
	require.NoError(t, alice.wire.close(), "DELETE alice's session")
	// bob still subscribes: alice's end leaves the upstream subscribed. The
	// updates come every 5 seconds; the second after alice's end comes well
	// after anything her end set off.
	for range 2 {
		_, ok := updatedAfter(bob, len(bob.inboxNotes()), everythingUpdatesURI)
		require.True(t, ok, "alice's end unsubscribed the instance bob still uses")
	}
	resp := bob.mustRequest("resources/unsubscribe", map[string]any{"uri": everythingUpdatesURI})
	require.Empty(t, string(resp.Error))
	assertJSONEqual(t, []byte(`{}`), resp.Result)
	require.NoError(t, bob.wire.close(), "DELETE bob's session")

	// Now carol subscribes and ends without unsubscribing: she was the last.
	carol := a.connect()
	resp = carol.mustRequest("resources/subscribe", map[string]any{"uri": everythingUpdatesURI})
	require.Empty(t, string(resp.Error))
	seen := len(observer.inboxNotes())
	require.NoError(t, carol.wire.close(), "DELETE carol's session")
	_, ok := updatedAfterMatch(observer, seen, isUnsubscribeLog(everythingUpdatesURI))
	assert.True(t, ok, "the last subscribed session ended: the upstream was never unsubscribed")
}

// updatedAfterMatch waits for a notification matching match among those
// after the first skip of c's notifications.
func updatedAfterMatch(c *client, skip int, match func(notification) bool) (notification, bool) {
	seen := 0
	return c.waitNotification(func(n notification) bool {
		seen++
		return seen > skip && match(n)
	}, updateWait)
}
