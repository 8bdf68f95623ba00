package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connectAt returns an initialized client of the endpoint url presenting
// token.
func (a *aggregator) connectAt(url, token string) *client {
	a.t.Helper()
	box := newInbox()
	w := newHTTPWire(url, box)
	w.hc.Transport = bearer{token: token, base: w.hc.Transport}
	c := &client{t: a.t, wire: w, inbox: box}
	a.t.Cleanup(func() { assert.NoError(a.t, c.wire.close(), "closing the HTTP session") })
	c.initialize()
	return c
}

// TestViewsByURL: /mcp/<view> serves the view's narrower catalog, always
// within the caller's own profile, over sessions and sessionless requests
// alike; a session opened at one view is unknown at another URL, and a
// name that is no view is 404.
func TestViewsByURL(t *testing.T) {
	t.Parallel()
	a, tok, _ := startProfiles(t, profilesConfig()+`views:
  readonly: { servers: [demo], tools: ['demo_e*', 'demo_add'] }
  counting: { servers: [counter] }
`)
	admin := []string{"mcp_release", "mcp_status"}

	laptop := a.connectAt(a.url+"/readonly", tok.laptop)
	assert.ElementsMatch(t, append(admin, "demo_echo", "demo_env", "demo_add"), toolNames(t, laptop.listTools()),
		"a client without a profile sees the view")
	ci := a.connectAt(a.url+"/readonly", tok.ci)
	assert.ElementsMatch(t, append(admin, "demo_echo", "demo_env"), toolNames(t, ci.listTools()),
		"the view within ci-bot's profile: demo_add is outside it")
	assert.ElementsMatch(t, admin, toolNames(t, a.connectAt(a.url+"/counting", tok.ci).listTools()),
		"a view never admits what the profile does not")
	counting := a.connectAt(a.url+"/counting", tok.laptop)
	assert.ElementsMatch(t, append(admin, "counter_get", "counter_increment", "counter_pid"), toolNames(t, counting.listTools()))

	resp := laptop.callTool("counter_increment", map[string]any{})
	require.NotNil(t, resp.Error, "a tool outside the view is unknown there")
	assert.Equal(t, 1, counterOf(t, counting.callToolResult("counter_increment", map[string]any{})))
	assert.Contains(t, toolNames(t, a.connectAs(tok.laptop).listTools()), "counter_increment", "/mcp itself is unchanged")

	t.Run("a session belongs to its view", func(t *testing.T) {
		session := laptop.wire.(*httpWire).session
		list := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
		for _, url := range []string{a.url, a.url + "/counting"} {
			r, body := rawPost(t, url, list, map[string]string{"Authorization": "Bearer " + tok.laptop,
				"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
			assert.Equal(t, http.StatusNotFound, r.StatusCode, "%s: %s", url, body)
		}
	})
	t.Run("sessionless", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		r, err := modernPostAs(ctx, a.url+"/readonly", tok.laptop, "tools/call", "counter_increment",
			map[string]any{"name": "counter_increment", "arguments": map[string]any{}})
		require.NoError(t, err)
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		assert.Contains(t, string(body), "unknown tool", "the view applies to sessionless requests: %s", body)
	})
	t.Run("no such view", func(t *testing.T) {
		for _, path := range []string{"/nope", "/", "/readonly/more"} {
			r, body := rawPost(t, a.url+path, initializeMsg(), map[string]string{"Authorization": "Bearer " + tok.laptop})
			assert.Equal(t, http.StatusNotFound, r.StatusCode, "%s: %s", path, body)
		}
		r, _ := rawPost(t, a.url+"/readonly", initializeMsg(), nil)
		assert.Equal(t, http.StatusUnauthorized, r.StatusCode, "a view needs the same credentials")
	})
}

// listenAt opens the GET stream of c's session at its own endpoint URL and
// feeds it to c's inbox.
func listenAt(t *testing.T, c *client) {
	t.Helper()
	w := c.wire.(*httpWire)
	resp := getStreamAt(t, c, w.url)
	go func() {
		defer resp.Body.Close()
		_ = readSSE(resp.Body, func(data []byte) bool {
			w.inbox.dispatch(data, nil)
			return true
		})
	}()
}

// TestViewsListChangedPerView: a view edit tells the sessions of that view
// their list changed, and no one else.
func TestViewsListChangedPerView(t *testing.T) {
	t.Parallel()
	config := func(bTools string) string {
		return fmt.Sprintf(`version: 1
views:
  a: { servers: [demo] }
  b: { servers: [counter], tools: [%s] }
servers:
  demo:
    truely-stateless: true
    %s
    transform: [{prefix: demo_}]
  counter:
    %s
    transform: [{prefix: counter_}]
`, bTools, demoServer("tools"), demoServer("counter"))
	}
	base := config("'counter_*'")
	r := newReloadRig(t, httpTransport, base)
	ca, cb := r.a.connectAt(r.a.url+"/a", ""), r.a.connectAt(r.a.url+"/b", "")
	listenAt(t, ca)
	listenAt(t, cb)
	require.Len(t, toolNames(t, cb.listTools()), 5)

	narrowed := config("counter_get")
	r.save(narrowed)
	r.waitReload()
	_, ok := cb.waitNotification(func(n notification) bool { return n.Method == "notifications/tools/list_changed" }, reloadWait)
	require.True(t, ok, "view b changed: its session is told")
	assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "counter_get"}, toolNames(t, cb.listTools()))
	r.settle(narrowed)
	ca.listTools()
	count := func(c *client) int {
		notes, _ := c.inbox.snapshot()
		n := 0
		for _, note := range notes {
			if note.Method == "notifications/tools/list_changed" {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 0, count(ca), "view a did not change")
	assert.Equal(t, 0, r.listChanged(), "/mcp did not change")
	assert.Equal(t, 1, count(cb))
}
