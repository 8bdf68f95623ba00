package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// profilesConfig has three clients with static tokens; ci-bot's profile
// admits the demo server's tools that start with demo_e, plus extra
// patterns.
func profilesConfig(extra ...string) string {
	patterns := append([]string{"'demo_e*'"}, extra...)
	return profilesHead(nil, "ci-bot: { servers: [demo], tools: ["+strings.Join(patterns, ", ")+"] }") +
		demoEntry("demo", "demo_", "tools", statelessServer) + demoEntry("counter", "counter_", "counter")
}

// profilesHead is a config's start up to its servers: startProfiles's three
// clients and the more tokens given (YAML lines under tokens:), and the
// profiles, one a line ("ci-bot: { servers: [demo] }").
func profilesHead(moreTokens []string, profiles ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\nhttp:\n  auth:\n    tokens:\n")
	for _, line := range append([]string{"ci-bot: { env: CI_BOT_TOKEN }", "laptop: { env: LAPTOP_TOKEN }", "tablet: { env: TABLET_TOKEN }"}, moreTokens...) {
		b.WriteString("      " + line + "\n")
	}
	b.WriteString("profiles:\n")
	for _, line := range profiles {
		b.WriteString("  " + line + "\n")
	}
	b.WriteString("servers:\n")
	return b.String()
}

// clientTokens are the tokens of profilesConfig's clients.
type clientTokens struct{ ci, laptop, tablet string }

func startProfiles(t *testing.T, config string) (*aggregator, clientTokens, string) {
	t.Helper()
	tok := clientTokens{randomToken(t), randomToken(t), randomToken(t)}
	path := writeConfig(t, config)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path},
		env: []string{"CI_BOT_TOKEN=" + tok.ci, "LAPTOP_TOKEN=" + tok.laptop, "TABLET_TOKEN=" + tok.tablet}})
	a.waitLoaded()
	return a, tok, path
}

// TestProfilesFilterToolsAndCalls: two clients with different profiles see
// different tools; a call outside the profile is answered as a call of a
// tool that does not exist, while the operator is told of it in the log
// and the metrics; mcp_status shows the profile's servers only.
func TestProfilesFilterToolsAndCalls(t *testing.T) {
	t.Parallel()
	a, tok, _ := startProfiles(t, profilesConfig())
	ci, laptop := a.connectAs(tok.ci), a.connectAs(tok.laptop)

	assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "demo_echo", "demo_env"}, toolNames(t, ci.listTools()),
		"ci-bot sees its profile's tools and the aggregator's own")
	all := toolNames(t, laptop.listTools())
	assert.Contains(t, all, "demo_add", "a client without a profile sees everything")
	assert.Contains(t, all, "counter_increment")

	unknown := ci.callTool("no_such_tool", map[string]any{"a": 1, "b": 2})
	// demo_add: ci-bot's server, a tool its patterns leave out;
	// counter_increment: a server its profile leaves out.
	for _, tool := range []string{"demo_add", "counter_increment"} {
		resp := ci.callTool(tool, map[string]any{"a": 1, "b": 2})
		assertLikeUnknown(t, tool, resp.Error, "no_such_tool", unknown.Error, "tools/call")
		waitLog(t, a.log, 1, "its profile hides", "client=ci-bot", "kind=tool", "name="+tool)
	}
	assert.Equal(t, "hi", firstText(t, ci.callToolResult("demo_echo", map[string]any{"text": "hi"})))
	assert.NotEmpty(t, laptop.callToolResult("counter_increment", map[string]any{}))

	var status struct {
		Servers []struct {
			ID    string `json:"id"`
			Tools int    `json:"tools"`
		} `json:"servers"`
	}
	require.NoError(t, json.Unmarshal([]byte(firstText(t, ci.callToolResult("mcp_status", map[string]any{}))), &status))
	require.Len(t, status.Servers, 1, "mcp_status shows ci-bot its profile's servers only")
	assert.Equal(t, "demo", status.Servers[0].ID)
	assert.Equal(t, 2, status.Servers[0].Tools, "the tools ci-bot sees, not how many the server exports")

	// mcp_release of a server outside the profile reads as one that does not exist.
	hidden := firstText(t, ci.callToolResult("mcp_release", map[string]any{"serverId": "counter"}))
	missing := firstText(t, ci.callToolResult("mcp_release", map[string]any{"serverId": "no-such-server"}))
	assert.Equal(t, strings.ReplaceAll(missing, "no-such-server", "counter"), hidden,
		"nothing tells ci-bot that counter exists")

	// The metrics, which only the operator sees, count the refused calls
	// as calls of those tools, and the made-up name's as an unknown one's.
	fams := opsScrapeAs(t, a, tok.laptop)
	calls := "mcp_aggregator_tool_calls_total"
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "demo", "tool": "demo_add", "outcome": "error"}))
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "counter", "tool": "counter_increment", "outcome": "error"}))
	assert.Equal(t, 1.0, opsValue(t, fams, calls, map[string]string{"server": "_unknown", "tool": "_unknown", "outcome": "error"}))
}

// assertLikeUnknown asserts that a request for a name the client's profile
// hides was answered (hidden: an error object or a result) as the same
// request for a made-up name of the same kind was (unknown), as JSON once
// each name is replaced by NAME: nothing tells the client the name exists.
func assertLikeUnknown(t *testing.T, name string, hidden json.RawMessage, madeUp string, unknown json.RawMessage, what string) {
	t.Helper()
	require.NotEmpty(t, unknown, "%s of %q has an answer", what, madeUp)
	require.NotEmpty(t, hidden, "%s of %q has an answer", what, name)
	assert.JSONEq(t, strings.ReplaceAll(string(unknown), madeUp, "NAME"), strings.ReplaceAll(string(hidden), name, "NAME"),
		"%s: a name outside the profile and a name that does not exist look alike", what)
}

// errorMessage reads the message of a JSON-RPC error object.
func errorMessage(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var e struct {
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
	return e.Message
}

// TestProfilesReloadNotifiesTheirClient: a profile edit sends
// tools/list_changed to the sessions of the client whose view changed, and
// to no other.
func TestProfilesReloadNotifiesTheirClient(t *testing.T) {
	t.Parallel()
	a, tok, path := startProfiles(t, profilesConfig())
	ci, laptop := a.connectAs(tok.ci), a.connectAs(tok.laptop)
	listen(t, a, ci)
	listen(t, a, laptop)
	assert.NotContains(t, toolNames(t, ci.listTools()), "demo_add")

	r := &reloadRig{t: t, a: a, c: ci, path: path}
	edited := profilesConfig("demo_add")
	r.save(edited)
	r.expectNotified(1)
	assert.Contains(t, toolNames(t, ci.listTools()), "demo_add", "the edited profile is in force without a restart")

	// Nothing more is on its way, to either client: an identical rewrite
	// reloads, then a round trip on each session.
	r.waitReload()
	r.settle(edited)
	laptop.listTools()
	assert.Equal(t, 1, r.listChanged(), "one notification for one edit")
	notes, _ := laptop.inbox.snapshot()
	for _, n := range notes {
		assert.NotEqual(t, "notifications/tools/list_changed", n.Method, "laptop's view did not change")
	}
}

// TestProfilesLeaseKeysPerClient: the lease key includes the client, so two
// clients naming the same sessionless lease, or none, never share an
// instance.
func TestProfilesLeaseKeysPerClient(t *testing.T) {
	t.Parallel()
	a, tok, _ := startProfiles(t, profilesConfig())
	assert.Equal(t, 1, modernCallAs(t, a.url, tok.laptop, "counter_increment", "conv-1"))
	assert.Equal(t, 1, modernCallAs(t, a.url, tok.tablet, "counter_increment", "conv-1"), "the same lease name of another client is another lease")
	assert.Equal(t, 2, modernCallAs(t, a.url, tok.laptop, "counter_increment", "conv-1"))
	assert.Equal(t, 1, modernCallAs(t, a.url, tok.laptop, "counter_increment", ""))
	assert.Equal(t, 1, modernCallAs(t, a.url, tok.tablet, "counter_increment", ""), "each client has its own anonymous lease")
	assert.Equal(t, 2, modernCallAs(t, a.url, tok.tablet, "counter_increment", ""))
	// Lease events name sessions by a digest: a key can hold an HTTP
	// session id, which is that session's credential.
	assert.NotContains(t, a.log.String(), "meta:conv-1", "lease keys stay out of the log")
	assert.Len(t, regexp.MustCompile(`msg="lease leased" server=counter session=[0-9a-f]{12} `).FindAllString(a.log.String(), -1), 4, "one lease per client and lease name")
}

// TestProfilesSearch: in search mode, mcp_search_tools finds only what the
// client's profile admits, and mcp_call_tool answers a call of the rest as
// one of a tool that does not exist, suggesting only tools the client sees.
func TestProfilesSearch(t *testing.T) {
	t.Parallel()
	a, tok, _ := startProfiles(t, strings.Replace(profilesConfig(), "version: 1\n", "version: 1\ndiscovery: {mode: search}\n", 1))
	ci, laptop := a.connectAs(tok.ci), a.connectAs(tok.laptop)
	found := func(c *client, query string) []string {
		var res struct {
			Structured struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(c.callToolResult("mcp_search_tools", map[string]any{"query": query, "limit": 50}), &res))
		var names []string
		for _, tl := range res.Structured.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	assert.Contains(t, found(laptop, "add two numbers"), "demo_add")
	assert.NotContains(t, found(ci, "add two numbers"), "demo_add", "search sees only what the profile admits")
	assert.Contains(t, found(ci, "echo"), "demo_echo")
	for _, n := range found(ci, "counter increment add echo environment") {
		assert.True(t, strings.HasPrefix(n, "demo_e"), "ci-bot found %s", n)
	}
	visible := map[string]bool{"mcp_search_tools": true, "mcp_call_tool": true, "mcp_status": true, "mcp_release": true, "demo_echo": true, "demo_env": true}
	call := func(name string) json.RawMessage {
		return ci.callToolResult("mcp_call_tool", map[string]any{"name": name, "arguments": map[string]any{"a": 1, "b": 2}})
	}
	var suggested []string
	for _, tool := range []string{"demo_add", "counter_increment"} {
		// The made-up name differs only in case, so that the closest names
		// suggested for the two are searched for with the same words.
		madeUp := strings.ToUpper(tool)
		hidden, unknown := call(tool), call(madeUp)
		assertLikeUnknown(t, tool, hidden, madeUp, unknown, "mcp_call_tool")
		if closest := regexp.MustCompile(`Closest: ([^.]+)\.`).FindStringSubmatch(firstText(t, hidden)); closest != nil {
			suggested = append(suggested, strings.Split(closest[1], ", ")...)
		}
		waitLog(t, a.log, 1, "its profile hides", "client=ci-bot", "kind=tool", "name="+tool)
	}
	require.NotEmpty(t, suggested, "demo_add comes close to tools ci-bot sees")
	for _, n := range suggested {
		assert.True(t, visible[n], "%s is suggested to ci-bot, which may not see it", n)
	}
	// The operator's metrics count the refused call as the tool's own.
	fams := opsScrapeAs(t, a, tok.laptop)
	assert.Equal(t, 1.0, opsValue(t, fams, "mcp_aggregator_tool_calls_total", map[string]string{"server": "demo", "tool": "demo_add", "outcome": "tool_error"}))
}

// TestProfilesResourcesAndPrompts: a profile's servers limit the resources,
// resource templates and prompts too, listed and used: a name outside the
// profile is answered as a name that does not exist, and logged.
func TestProfilesResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	config := profilesConfig() + fmt.Sprintf("  surface:\n    %s\n", demoServer("surface"))
	a, tok, _ := startProfiles(t, config)
	ci, laptop := a.connectAs(tok.ci), a.connectAs(tok.laptop)

	list := func(c *client, method, member string) []map[string]any {
		resp := c.mustRequest(method, map[string]any{})
		require.Empty(t, resp.Error, "%s: %s", method, resp.Error)
		var result map[string][]map[string]any
		require.NoError(t, json.Unmarshal(resp.Result, &result))
		return result[member]
	}
	resources := list(laptop, "resources/list", "resources")
	prompts := list(laptop, "prompts/list", "prompts")
	require.NotEmpty(t, resources, "the surface server lists resources")
	require.NotEmpty(t, prompts, "the surface server lists prompts")
	assert.NotEmpty(t, list(laptop, "resources/templates/list", "resourceTemplates"))

	assert.Empty(t, list(ci, "resources/list", "resources"), "ci-bot's profile admits the demo server only")
	assert.Empty(t, list(ci, "resources/templates/list", "resourceTemplates"))
	assert.Empty(t, list(ci, "prompts/list", "prompts"))

	// Each request asks for a name of its own, so that each is logged.
	require.GreaterOrEqual(t, len(resources), 3)
	require.GreaterOrEqual(t, len(prompts), 2)
	uri := func(i int) string { u, _ := resources[i]["uri"].(string); return u }
	name := func(i int) string { n, _ := prompts[i]["name"].(string); return n }
	template, _ := list(laptop, "resources/templates/list", "resourceTemplates")[0]["uriTemplate"].(string)
	const (
		madeUpURI      = "none://made-up"
		madeUpPrompt   = "no_such_prompt"
		madeUpTemplate = "none://made-up/{id}"
	)
	promptRef := func(name string) map[string]any {
		return map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": name}, "argument": map[string]any{"name": "a", "value": ""}}
	}
	templateRef := func(uri string) map[string]any {
		return map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": uri}, "argument": map[string]any{"name": "id", "value": ""}}
	}
	for _, req := range []struct {
		method, kind, hidden, madeUp string
		params                       func(string) map[string]any
	}{
		{"resources/read", "resource", uri(0), madeUpURI, func(u string) map[string]any { return map[string]any{"uri": u} }},
		{"resources/subscribe", "resource", uri(1), madeUpURI, func(u string) map[string]any { return map[string]any{"uri": u} }},
		{"resources/unsubscribe", "resource", uri(2), madeUpURI, func(u string) map[string]any { return map[string]any{"uri": u} }},
		{"prompts/get", "prompt", name(0), madeUpPrompt, func(n string) map[string]any { return map[string]any{"name": n} }},
		{"completion/complete", "prompt", name(1), madeUpPrompt, promptRef},
		{"completion/complete", `"resource template"`, template, madeUpTemplate, templateRef},
	} {
		what := req.method + " of a " + strings.Trim(req.kind, `"`)
		hidden := ci.mustRequest(req.method, req.params(req.hidden))
		unknown := ci.mustRequest(req.method, req.params(req.madeUp))
		assertLikeUnknown(t, req.hidden, hidden.Error, req.madeUp, unknown.Error, what)
		waitLog(t, a.log, 1, "its profile hides", "client=ci-bot", "kind="+req.kind, "name="+req.hidden)
		assert.Empty(t, laptop.mustRequest(req.method, req.params(req.hidden)).Error, "%s: laptop, without a profile, reaches it", what)
	}
}

// TestProfilesServersOfOthersTakeNoPart: a server outside a client's
// profile takes no part in what the client sees or reaches: listed first
// in the config, it does not keep the URIs and templates the client's own
// server offers too, and it does not answer, nor is named as the answer,
// for a URI no server of the profile lists.
func TestProfilesServersOfOthersTakeNoPart(t *testing.T) {
	t.Parallel()
	config := profilesHead(nil, "ci-bot: { servers: [mine] }", "tablet: { servers: [demo] }") +
		demoEntry("theirs", "theirs_", "surface", statelessServer) +
		demoEntry("mine", "mine_", "surface", statelessServer) +
		demoEntry("demo", "demo_", "tools", statelessServer)
	a, tok, _ := startProfiles(t, config)
	ci, laptop, tablet := a.connectAs(tok.ci), a.connectAs(tok.laptop), a.connectAs(tok.tablet)

	list := func(c *client, method string) json.RawMessage {
		resp := c.mustRequest(method, map[string]any{})
		require.Empty(t, resp.Error, "%s: %s", method, resp.Error)
		return resp.Result
	}
	// Both servers list the same resources and templates: ci-bot sees its
	// own server's, which are what the gateway lists as a whole.
	for _, method := range []string{"resources/list", "resources/templates/list"} {
		assert.JSONEq(t, string(list(laptop, method)), string(list(ci, method)), "%s: ci-bot sees what its own server lists", method)
	}
	openSessionStream(t, a, ci)
	for _, req := range []struct {
		method string
		params map[string]any
	}{
		{"resources/read", map[string]any{"uri": "demo://r/1"}},
		{"resources/read", map[string]any{"uri": "demo://t/0/7"}},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "demo://t/0/{id}"}, "argument": map[string]any{"name": "id", "value": ""}}},
		{"resources/subscribe", map[string]any{"uri": "demo://r/1"}},
	} {
		resp := ci.mustRequest(req.method, req.params)
		assert.Empty(t, resp.Error, "%s %v reaches ci-bot's own server: %s", req.method, req.params, resp.Error)
	}
	_, ok := updatedAfter(ci, 0, "demo://r/1")
	assert.True(t, ok, "ci-bot hears of the resource it subscribed to on its own server")

	// tablet's profile has no server that offers resources: a URI is
	// unknown to it, as on a gateway where none does.
	resp := tablet.mustRequest("resources/read", map[string]any{"uri": "other://unlisted"})
	require.NotEmpty(t, resp.Error)
	msg := errorMessage(t, resp.Error)
	assert.Contains(t, msg, "no server offers resources", "tablet is told what its profile offers")
	assert.NotContains(t, msg, "not available", "no server outside tablet's profile is said to offer the URI")
}

// TestProfilesStatusShowsOwnInstances: mcp_status shows a client with a
// profile the shared instances of its servers and its own leased ones,
// not the instances other clients lease, and none of the problems of
// http.auth (which name other clients and their tokens), whether its
// profile names servers or tools only; a client without a profile sees
// them all.
func TestProfilesStatusShowsOwnInstances(t *testing.T) {
	t.Parallel()
	config := profilesHead([]string{"kiosk: kiosk-literal"}, "ci-bot: { servers: [counter, demo] }", "tablet: { tools: ['counter_*'] }") +
		demoEntry("counter", "counter_", "counter") + demoEntry("demo", "demo_", "tools", statelessServer)
	a, tok, _ := startProfiles(t, config)
	clients := map[string]*client{"ci-bot": a.connectAs(tok.ci), "laptop": a.connectAs(tok.laptop), "tablet": a.connectAs(tok.tablet)}
	for _, c := range clients {
		assert.Equal(t, 1, coreCounterValue(t, c, "counter_increment"), "each session leases its own instance")
	}

	type status struct {
		Problems  []string `json:"problems"`
		Instances []struct {
			Server  string `json:"serverId"`
			Role    string `json:"role"`
			Session string `json:"session"`
			Yours   bool   `json:"yours"`
		} `json:"instances"`
	}
	statusOf := func(c *client) (st status) {
		require.NoError(t, json.Unmarshal([]byte(firstText(t, c.callToolResult("mcp_status", map[string]any{}))), &st))
		return st
	}
	for name, c := range clients {
		st := statusOf(c)
		leased, yours := 0, 0
		for _, in := range st.Instances {
			if in.Role == "leased" {
				leased++
				if in.Yours {
					yours++
				}
			}
		}
		problems := strings.Join(st.Problems, "\n")
		if name == "laptop" {
			assert.Equal(t, 3, leased, "laptop, without a profile, sees every client's leased instance")
			assert.Contains(t, problems, "http.auth.tokens.kiosk", "laptop, without a profile, sees every problem")
			continue
		}
		assert.Equal(t, 1, yours, "%s: its own leased instance", name)
		assert.Equal(t, 1, leased, "%s sees no instance another client leases: %+v", name, st.Instances)
		assert.NotContains(t, problems, "http.auth", "%s sees no problem of http.auth", name)
	}
}

// TestProfilesOfferWhatTheirServersOffer: initialize and server/discover
// offer a client with a profile what its profile's servers offer, so that
// the capabilities tell it nothing of the servers outside its profile.
func TestProfilesOfferWhatTheirServersOffer(t *testing.T) {
	t.Parallel()
	config := profilesConfig() + fmt.Sprintf("  surface:\n    %s\n", demoServer("surface"))
	a, tok, _ := startProfiles(t, config)
	type capabilities map[string]json.RawMessage
	initialized := func(token string) capabilities {
		var res struct {
			Capabilities capabilities `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(a.newClientAs(token).initialize(), &res))
		return res.Capabilities
	}
	discovered := func(token string) capabilities {
		resp, err := modernPostAs(t.Context(), a.url, token, "server/discover", "", map[string]any{})
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var msg struct {
			Result struct {
				Capabilities capabilities `json:"capabilities"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(body, &msg), "%s", body)
		return msg.Result.Capabilities
	}
	for how, offered := range map[string]func(string) capabilities{"initialize": initialized, "server/discover": discovered} {
		laptop, ci := offered(tok.laptop), offered(tok.ci)
		require.Contains(t, ci, "tools", "%s", how)
		for _, surface := range []string{"resources", "prompts", "completions", "logging"} {
			assert.Contains(t, laptop, surface, "%s: the surface server offers %s", how, surface)
			assert.NotContains(t, ci, surface, "%s: no server of ci-bot's profile offers %s", how, surface)
		}
	}
}

// TestProfilesEditCutsOffNotifications: once a profile edit takes a
// server out of a client's profile, nothing that server sends reaches the
// client any more: not the updates of the resources a listen stream of it
// subscribed to, while those of a server still in its profile keep coming.
func TestProfilesEditCutsOffNotifications(t *testing.T) {
	t.Parallel()
	config := func(servers string) string {
		return profilesHead(nil, "ci-bot: { servers: ["+servers+"] }") +
			demoEntry("theirs", "theirs_", "surface", statelessServer, "resources: { whitelist: ['demo://r/1'] }") +
			demoEntry("mine", "mine_", "surface", statelessServer, "resources: { whitelist: ['demo://r/2'] }")
	}
	a, tok, path := startProfiles(t, config("theirs, mine"))
	laptop := a.connectAs(tok.laptop)

	resp, err := modernPostAs(t.Context(), a.url, tok.ci, "subscriptions/listen", "", map[string]any{
		"notifications": map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{"demo://r/1", "demo://r/2"}}})
	require.NoError(t, err)
	notes := make(chan map[string]any, 64)
	go func() {
		defer close(notes)
		defer resp.Body.Close()
		_ = readSSE(resp.Body, func(data []byte) bool {
			var m map[string]any
			if json.Unmarshal(data, &m) == nil {
				notes <- m
			}
			return true
		})
	}()
	// updated is the URI a notification tells an update of, or "".
	updated := func(m map[string]any) string {
		if m["method"] != "notifications/resources/updated" {
			return ""
		}
		uri, _ := m["params"].(map[string]any)["uri"].(string)
		return uri
	}
	// waitFor reads the stream until match, and returns what it read.
	waitFor := func(what string, match func(map[string]any) bool) []map[string]any {
		var seen []map[string]any
		for {
			select {
			case m, ok := <-notes:
				require.True(t, ok, "the listen stream ended before %s; saw %v", what, seen)
				seen = append(seen, m)
				if match(m) {
					return seen
				}
			case <-time.After(updateWait):
				require.Fail(t, "no "+what, "saw %v", seen)
			}
		}
	}
	// Each subscription brings its resource's first update.
	first := map[string]bool{}
	waitFor("the first updates", func(m map[string]any) bool {
		first[updated(m)] = true
		return first["demo://r/1"] && first["demo://r/2"]
	})

	r := &reloadRig{t: t, a: a, path: path}
	r.save(config("mine"))
	waitFor("tools/list_changed after the profile edit", func(m map[string]any) bool {
		return m["method"] == "notifications/tools/list_changed"
	})
	notify := func(tool, uri string) {
		laptop.callToolResult(tool, map[string]any{"notifications": []any{
			map[string]any{"method": "notifications/resources/updated", "params": map[string]any{"uri": uri}}}})
	}
	notify("theirs_notify", "demo://r/1")
	notify("mine_notify", "demo://r/2")
	for _, m := range waitFor("the update of demo://r/2", func(m map[string]any) bool { return updated(m) == "demo://r/2" }) {
		assert.NotEqual(t, "demo://r/1", updated(m), "ci-bot hears nothing more of a server its profile no longer admits")
	}
}

// TestProfilesEditHidesTasks: once a profile edit takes a server out of a
// client's profile, the tasks the client started there are out of its
// reach: not found, as a forged id is, and not listed.
func TestProfilesEditHidesTasks(t *testing.T) {
	t.Parallel()
	tasks := tasksConfig(t) // alpha and beta, two task servers
	config := func(servers string) string {
		return strings.Replace(tasks, "version: 1\nservers:\n", profilesHead(nil, "ci-bot: { servers: ["+servers+"] }"), 1)
	}
	a, tok, path := startProfiles(t, config("alpha, beta"))
	ci := a.connectAs(tok.ci)
	listen(t, a, ci)
	onAlpha := startTask(t, ci, "a_countdown", map[string]any{"label": "alpha job", "steps": 100, "stepMs": 100})
	onBeta := startTask(t, ci, "b_countdown", map[string]any{"label": "beta job", "steps": 100, "stepMs": 100})
	require.Equal(t, []string{onAlpha.TaskID, onBeta.TaskID}, listTasks(t, ci))

	r := &reloadRig{t: t, a: a, c: ci, path: path}
	r.save(config("beta"))
	r.expectNotified(1)
	forged := "task-00112233445566778899aabbccddeeff"
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		hidden := mustTaskError(t, ci.mustRequest(method, map[string]any{"taskId": onAlpha.TaskID}), method+" of a task on alpha")
		none := mustTaskError(t, ci.mustRequest(method, map[string]any{"taskId": forged}), method+" of a forged id")
		assert.Equal(t, none.Code, hidden.Code, method)
		assert.Equal(t, strings.ReplaceAll(none.Message, forged, "ID"), strings.ReplaceAll(hidden.Message, onAlpha.TaskID, "ID"),
			"%s: a task of a server outside the profile and no task look alike", method)
	}
	assert.Equal(t, []string{onBeta.TaskID}, listTasks(t, ci), "the task on beta, still in the profile, is listed alone")
	got := mustResult(t, ci.mustRequest("tasks/get", map[string]any{"taskId": onBeta.TaskID}), "tasks/get of the task on beta")
	assert.Equal(t, onBeta.TaskID, got["taskId"])
}

// TestProfilesEditEndsLeases: a profile edit that takes a leased server
// out of a client's profile ends that client's leases of it, so that
// nothing of the server goes on serving, or asking, the client; another
// client's lease of the same server stays.
func TestProfilesEditEndsLeases(t *testing.T) {
	t.Parallel()
	config := func(servers string) string {
		return profilesHead(nil, "ci-bot: { servers: ["+servers+"] }") +
			demoEntry("counter", "counter_", "counter") + demoEntry("demo", "demo_", "tools", statelessServer)
	}
	a, tok, path := startProfiles(t, config("counter, demo"))
	ci, laptop := a.connectAs(tok.ci), a.connectAs(tok.laptop)
	assert.Equal(t, 1, coreCounterValue(t, ci, "counter_increment"))
	assert.Equal(t, 1, coreCounterValue(t, laptop, "counter_increment"))
	assert.Equal(t, 2, leaseStatusOf(t, laptop).Servers[0].Leased, "two clients, two leases of counter")

	r := &reloadRig{t: t, a: a, path: path}
	r.save(config("demo"))
	r.waitReload()
	leased := leaseStatusOf(t, laptop)
	require.Equal(t, "counter", leased.Servers[0].ID)
	assert.Equal(t, 1, leased.Servers[0].Leased, "ci-bot's lease of counter ended with the edit")
	assert.True(t, a.log.containsLine(`msg="lease revoked" server=counter`), "the log says why the lease ended")
	assert.Equal(t, 2, coreCounterValue(t, laptop, "counter_increment"), "laptop's lease is untouched")
}
