package integration

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFidelityMoreLeasedListsStayTheSessions: server-everything makes a
// resource for the session that asks (gzip-file-as-resource) and says its
// resource list changed. Through the aggregator, with an instance leased
// to each session, that session is told and lists and reads the resource
// exactly as a client connected directly; another session neither lists it
// nor is told of it, as it would not be directly.
func TestFidelityMoreLeasedListsStayTheSessions(t *testing.T) {
	t.Parallel()
	entry := nodeEntry(t, everythingEntry)
	const uri = "demo://resource/session/alice.gz"
	makeArgs := map[string]any{"name": "alice.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ="}
	isListChanged := func(n notification) bool { return n.Method == "notifications/resources/list_changed" }

	direct := connectDirect(t, nil, "node", entry, "stdio")
	direct.initialize()
	direct.callToolResult("gzip-file-as-resource", makeArgs)
	_, ok := direct.waitNotification(isListChanged, callTimeout)
	require.True(t, ok, "server-everything says its resource list changed")
	wantList := mustResult(t, direct.mustRequest("resources/list", map[string]any{}), "direct resources/list")
	wantRead := mustResult(t, direct.mustRequest("resources/read", map[string]any{"uri": uri}), "direct read")

	a := serveConfig(t, httpTransport, leasedEverythingConfig(entry))
	a.waitLoaded()
	alice, bob := a.connect(), a.connect()
	for _, c := range []*client{alice, bob} {
		openSessionStream(t, a, c)
		c.callToolResult("echo", map[string]any{"message": "lease"}) // each holds its own instance
	}
	sharedList := mustResult(t, bob.mustRequest("resources/list", map[string]any{}), "bob's list before")

	alice.callToolResult("gzip-file-as-resource", makeArgs)
	_, ok = alice.waitNotification(isListChanged, callTimeout)
	require.True(t, ok, "alice is told her resource list changed; log:\n%s", a.log)
	assert.Equal(t, wantList, mustResult(t, alice.mustRequest("resources/list", map[string]any{}), "alice's list"),
		"alice lists what her instance lists")
	assert.Equal(t, wantRead, mustResult(t, alice.mustRequest("resources/read", map[string]any{"uri": uri}), "alice's read"))

	assert.Equal(t, sharedList, mustResult(t, bob.mustRequest("resources/list", map[string]any{}), "bob's list after"),
		"bob does not list alice's resource")
	notes, _ := bob.inbox.snapshot()
	assert.False(t, slices.ContainsFunc(notes, isListChanged), "bob is not told of alice's list")
}
