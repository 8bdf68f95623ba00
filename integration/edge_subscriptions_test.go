package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// edgeMaxSubscriptions is how many resource subscriptions one session may
// hold, and how many URIs one subscriptions/listen stream may name.
const edgeMaxSubscriptions = 1000

// edgeSubscribe sends resources/subscribe of uri and returns its error
// (nil when it succeeded).
func edgeSubscribe(t *testing.T, c *client, method, uri string) *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
} {
	t.Helper()
	resp := c.mustRequest(method, map[string]any{"uri": uri})
	if len(resp.Error) == 0 {
		assertJSONEqual(t, []byte(`{}`), resp.Result)
		return nil
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(resp.Error, &e), "%s", resp.Error)
	return &e
}

// TestEdgeSubscriptionsPerSessionAreBounded: one session may hold 1,000
// resource subscriptions. Each costs the gateway and the upstream memory
// and the upstream a request when it begins and ends; without a bound, one
// client subscribing to a million URIs of a template grew the gateway by
// hundreds of MB, and ending its session started a goroutine per URI. The
// next one is refused with an error that names the bound and the fix,
// sends nothing upstream, and the session goes on: a URI it holds may be
// subscribed again, and an unsubscribe makes room. Another session has
// bounds of its own.
func TestEdgeSubscriptionsPerSessionAreBounded(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, sharedSurfaceConfig("edge"))
	a.waitLoaded()
	alice := a.connect()
	uri := func(i int) string { return fmt.Sprintf("demo://t/0/%d", i) }
	for i := range edgeMaxSubscriptions {
		require.Nil(t, edgeSubscribe(t, alice, "resources/subscribe", uri(i)), "subscription %d of %d", i+1, edgeMaxSubscriptions)
	}

	refused := edgeSubscribe(t, alice, "resources/subscribe", uri(edgeMaxSubscriptions))
	require.NotNil(t, refused, "subscription %d was accepted", edgeMaxSubscriptions+1)
	assert.Equal(t, -32603, refused.Code)
	assert.Contains(t, refused.Message, "1000 resource subscriptions")
	assert.Contains(t, refused.Message, "resources/unsubscribe", "the error says how to make room")

	assert.Nil(t, edgeSubscribe(t, alice, "resources/subscribe", uri(7)), "a URI the session holds may be subscribed again")
	require.Nil(t, edgeSubscribe(t, alice, "resources/unsubscribe", uri(7)))
	assert.Nil(t, edgeSubscribe(t, alice, "resources/subscribe", uri(edgeMaxSubscriptions)), "an unsubscribe made room for one more")
	assert.NotNil(t, edgeSubscribe(t, alice, "resources/subscribe", uri(edgeMaxSubscriptions+1)), "and for one only")

	bob := a.connect()
	assert.Nil(t, edgeSubscribe(t, bob, "resources/subscribe", uri(edgeMaxSubscriptions+1)), "another session is not held to alice's count")
	assert.Equal(t, "prompt p1", edgePromptText(t, alice), "alice's session goes on serving")
}

// edgePromptText gets the surface server's prompt p1 and returns its text.
func edgePromptText(t *testing.T, c *client) string {
	t.Helper()
	resp := c.mustRequest("prompts/get", map[string]any{"name": "p1", "arguments": map[string]any{"a": "x"}})
	require.Empty(t, string(resp.Error))
	var r struct {
		Messages []struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(resp.Result, &r), "%s", resp.Result)
	require.Len(t, r.Messages, 1, "%s", resp.Result)
	return r.Messages[0].Content.Text
}

// TestEdgeListenNamesBoundedSubscriptions: a subscriptions/listen stream
// (2026-07-28) may name 1,000 resources. One that names more is refused at
// once with -32602 naming the bound, instead of subscribing each upstream,
// one after the other, before it is acknowledged (20,000 URIs took 25 s of
// the upstream's time).
func TestEdgeListenNamesBoundedSubscriptions(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, sharedSurfaceConfig("edge"))
	a.waitLoaded()
	uris := make([]string, edgeMaxSubscriptions+1)
	for i := range uris {
		uris[i] = fmt.Sprintf("demo://t/0/%d", i)
	}
	body := mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen",
		"params": map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris}, "_meta": modernMeta()}})
	// Refused at once, the reply ends; accepted, the stream would stay open.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	code, id, message := modernError(t, coreDo(t, modernHTTPRequest(t, ctx, a.url, "subscriptions/listen", "", string(body), nil)))
	assert.Equal(t, -32602, code)
	assertJSONEqual(t, []byte(`5`), id)
	assert.Contains(t, message, "names 1001 URIs")
	assert.Contains(t, message, "1000")
	assert.True(t, strings.Contains(message, "fewer"), "the error says how to fix it: %s", message)
}
