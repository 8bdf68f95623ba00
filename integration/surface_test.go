package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// initializeWith performs the handshake declaring capabilities.
func (c *client) initializeWith(capabilities map[string]any) json.RawMessage {
	c.t.Helper()
	resp := c.mustRequest("initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    capabilities,
		"clientInfo":      map[string]any{"name": "mcp-aggregator-integration", "version": "1.0.0"},
	})
	require.Empty(c.t, resp.Error, "initialize failed")
	c.wire.negotiated(protocolVersion)
	require.NoError(c.t, c.notify("notifications/initialized", nil))
	return resp.Result
}

// surfaceConfig fronts server-everything twice: "every" (prefix ev_) and
// "twin", whose resources are the same URIs and whose prompts get the same
// exported names, so every one of them collides and stays with "every".
func surfaceConfig(entry string) string {
	return "version: 1\nservers:\n" +
		everythingYAML("every", entry, statelessServer, "transform: [{prefix: ev_}]",
			"tools: {whitelist: ['echo', 'trigger-sampling-request', 'trigger-elicitation-request']}") +
		everythingYAML("twin", entry, statelessServer, "transform: [{prefix: ev_}]", "tools: {whitelist: ['get-sum']}")
}

// result decodes a successful response's result.
func mustResult(t *testing.T, resp *response, what string) map[string]any {
	t.Helper()
	require.Empty(t, string(resp.Error), "%s", what)
	var m map[string]any
	require.NoError(t, json.Unmarshal(resp.Result, &m), "%s", what)
	return m
}

// TestSurfaceEverything: resources, templates, prompts and completions of
// the reference server reach the client as the server sent them, routed to
// the owner; a colliding second server keeps none of them; sampling goes to
// a client that declared it and never to one that did not.
func TestSurfaceEverything(t *testing.T) {
	entry := nodeEntry(t, everythingEntry)
	direct := connectDirect(t, nil, "node", entry, "stdio")

	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, surfaceConfig(entry))
		a.waitLoaded()
		c := a.newClient()
		c.inbox.onRequest = func(method string, params json.RawMessage) (string, string) {
			if method == "sampling/createMessage" {
				return `{"role":"assistant","content":{"type":"text","text":"sampled by the test client"},"model":"test-model","stopReason":"endTurn"}`, ""
			}
			return "", `{"code":-32601,"message":"not implemented: ` + method + `"}`
		}
		init := c.initializeWith(map[string]any{"sampling": map[string]any{}})
		var caps struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(init, &caps))
		for _, k := range []string{"tools", "resources", "prompts", "completions", "logging"} {
			assert.Contains(t, caps.Capabilities, k, "the upstream offers %s", k)
		}

		// Lists: as the upstream sent them (prompt names aside), one copy each.
		for _, l := range []struct{ method, key string }{{"resources/list", "resources"}, {"resources/templates/list", "resourceTemplates"}} {
			want := mustResult(t, direct.mustRequest(l.method, map[string]any{}), l.method)[l.key]
			got := mustResult(t, c.mustRequest(l.method, map[string]any{}), l.method)[l.key]
			assert.Equal(t, want, got, "%s through the aggregator equals the upstream's", l.method)
		}
		wantPrompts := mustResult(t, direct.mustRequest("prompts/list", map[string]any{}), "prompts/list")["prompts"].([]any)
		gotPrompts := mustResult(t, c.mustRequest("prompts/list", map[string]any{}), "prompts/list")["prompts"].([]any)
		require.Len(t, gotPrompts, len(wantPrompts), "the twin's colliding prompts are not exported twice")
		for i := range wantPrompts {
			w := wantPrompts[i].(map[string]any)
			w["name"] = "ev_" + w["name"].(string)
			assert.Equal(t, w, gotPrompts[i])
		}

		// Reads: a listed URI and one that only a template matches.
		resources := mustResult(t, direct.mustRequest("resources/list", map[string]any{}), "list")["resources"].([]any)
		require.NotEmpty(t, resources)
		uri := resources[0].(map[string]any)["uri"].(string)
		want := mustResult(t, direct.mustRequest("resources/read", map[string]any{"uri": uri}), uri)
		got := mustResult(t, c.mustRequest("resources/read", map[string]any{"uri": uri}), uri)
		assert.Equal(t, want, got, "resources/read %s", uri)
		// This one is made on the fly, with the time in its text.
		dynamic := "demo://resource/dynamic/text/3"
		got = mustResult(t, c.mustRequest("resources/read", map[string]any{"uri": dynamic}), dynamic)
		contents := got["contents"].([]any)[0].(map[string]any)
		assert.Equal(t, dynamic, contents["uri"])
		assert.True(t, strings.HasPrefix(contents["text"].(string), "Resource 3: "), "%v", contents)
		resp := c.mustRequest("resources/read", map[string]any{"uri": "nowhere://at/all"})
		assert.Contains(t, string(resp.Error), "-32002", "an unknown URI is resource-not-found")

		// A prompt by its exported name, sent upstream under the original.
		want = mustResult(t, direct.mustRequest("prompts/get", map[string]any{"name": "args-prompt", "arguments": map[string]string{"city": "Paris"}}), "direct prompt")
		got = mustResult(t, c.mustRequest("prompts/get", map[string]any{"name": "ev_args-prompt", "arguments": map[string]string{"city": "Paris"}}), "prompt")
		assert.Equal(t, want, got)

		// Completion of a prompt argument.
		params := func(name string) map[string]any {
			return map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": name},
				"argument": map[string]any{"name": "department", "value": "E"}}
		}
		want = mustResult(t, direct.mustRequest("completion/complete", params("completable-prompt")), "direct completion")
		got = mustResult(t, c.mustRequest("completion/complete", params("ev_completable-prompt")), "completion")
		assert.Equal(t, want, got)

		// Logging level per session.
		assert.Empty(t, string(c.mustRequest("logging/setLevel", map[string]any{"level": "debug"}).Error))

		// Sampling reaches this client, which declared it, and its answer the tool.
		res := c.callToolResult("ev_trigger-sampling-request", map[string]any{"prompt": "say hi", "maxTokens": 10})
		assert.Contains(t, string(res), "sampled by the test client")

		// The collisions are reported, naming both servers.
		status := firstText(t, c.callToolResult("mcp_status", map[string]any{}))
		assert.Contains(t, status, `also listed by server \"every\"`)
		assert.Contains(t, status, `already owned by \"every\"`)

		// A client without the capability is never asked; the tool fails promptly.
		b := serveConfig(t, tr, surfaceConfig(entry))
		b.waitLoaded()
		other := b.newClient()
		other.inbox.onRequest = func(method string, _ json.RawMessage) (string, string) {
			t.Errorf("a client without the sampling capability was sent %s", method)
			return "", `{"code":-32601,"message":"no"}`
		}
		other.initializeWith(map[string]any{})
		start := time.Now()
		r := other.callTool("ev_trigger-sampling-request", map[string]any{"prompt": "say hi", "maxTokens": 10})
		assert.Less(t, time.Since(start), 20*time.Second, "the tool learns at once that the client cannot sample")
		assert.True(t, len(r.Error) > 0 || strings.Contains(string(r.Result), `"isError":true`), "the call fails: %s %s", r.Error, r.Result)
	})
}

// TestSurfaceElicitationReachesItsSession: two sessions call the same
// shared upstream (over HTTP, where each upstream request arrives on the
// stream of the call it belongs to) at once; each session's client is asked
// for its own call only, and its answer reaches its own result.
func TestSurfaceElicitationReachesItsSession(t *testing.T) {
	t.Parallel()
	base := remoteEverything(t, "streamableHttp")
	a := serveConfig(t, httpTransport, `version: 1
servers:
  ev:
    truely-stateless: true
    url: `+base+`/mcp
    transform: [{prefix: ev_}]
    tools: {whitelist: [trigger-elicitation-request]}
`)
	a.waitLoaded()
	type outcome struct {
		name   string
		result json.RawMessage
		asked  int
	}
	results := make(chan outcome, 2)
	release := make(chan struct{})
	var clients []*client
	var askedCounts [2]chan int
	for i, name := range []string{"alice", "bob"} {
		c := a.newClient()
		asked := make(chan int, 1)
		asked <- 0
		askedCounts[i] = asked
		c.inbox.onRequest = func(method string, _ json.RawMessage) (string, string) {
			if method != "elicitation/create" {
				return "", `{"code":-32601,"message":"no"}`
			}
			asked <- <-asked + 1
			<-release // both calls are in flight before either is answered
			return `{"action":"accept","content":{"name":"` + name + `"}}`, ""
		}
		c.initializeWith(map[string]any{"elicitation": map[string]any{}})
		clients = append(clients, c)
	}
	for i, name := range []string{"alice", "bob"} {
		go func() {
			results <- outcome{name: name, result: clients[i].callToolResult("ev_trigger-elicitation-request", map[string]any{})}
		}()
	}
	// Both clients are asked (each once) before either answers.
	deadline := time.Now().Add(callTimeout)
	for {
		n0 := <-askedCounts[0]
		askedCounts[0] <- n0
		n1 := <-askedCounts[1]
		askedCounts[1] <- n1
		if n0 == 1 && n1 == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not both clients were asked: %d, %d", n0, n1)
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	for range 2 {
		o := <-results
		assert.Contains(t, string(o.result), "Name: "+o.name, "the answer of %s's own client reached %s's result", o.name, o.name)
	}
	for i := range askedCounts {
		assert.Equal(t, 1, <-askedCounts[i], "each client was asked exactly once")
	}
}
