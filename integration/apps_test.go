package integration

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The two MCP App example servers both serve tool get-time pointing at
// ui://get-time/mcp-app.html, each with HTML of its own.
const (
	appVanillaEntry = "@modelcontextprotocol/server-basic-vanillajs/dist/index.js"
	appPreactEntry  = "@modelcontextprotocol/server-basic-preact/dist/index.js"
	appUpstreamURI  = "ui://get-time/mcp-app.html"
)

// appsConfig puts the two example servers behind prefixes a_ and b_, and
// a demo server that declares extensions (the MCP Apps one among them)
// behind ext_. Client "narrow" sees server a alone; "partial" sees a and b
// but only a's tools; "plain" sees a and b, every tool.
func appsConfig(vanilla, preact string) string {
	return `version: 1
http:
  auth:
    tokens:
      host: { env: HOST_TOKEN }
      narrow: { env: NARROW_TOKEN }
      partial: { env: PARTIAL_TOKEN }
      plain: { env: PLAIN_TOKEN }
profiles:
  narrow: { servers: [a] }
  partial: { servers: [a, b], tools: ['a_*'] }
  plain: { servers: [a, b] }
servers:
  a:
    truely-stateless: true
    command: node
    args: [` + quoted(vanilla) + `, --stdio]
    transform: [{prefix: a_}]
  b:
    truely-stateless: true
    command: node
    args: [` + quoted(preact) + `, --stdio]
    transform: [{prefix: b_}]
  ext:
    truely-stateless: true
    ` + demoServer("surface", `extensions={"io.modelcontextprotocol/ui":{},"com.example/future":{"level":2,"x-unknown":[1,{"k":null}]}}`) + `
    transform: [{prefix: ext_}]
    tools: {whitelist: [nothing]}
`
}

// TestMCPApps drives the aggregator with the TypeScript SDK client in
// front of two MCP App servers that serve the same ui:// URI: each tool's
// _meta.ui.resourceUri (and the flat key) reads back, through the
// aggregator, the HTML its own server serves; the two never collide; a
// profile that hides a server, or the tools that point at an app, hides
// the app's resource; the extensions capability is offered only when a
// server of the client's view declares it, unknown settings untouched.
func TestMCPApps(t *testing.T) {
	t.Parallel()
	vanilla, preact := nodeEntry(t, appVanillaEntry), nodeEntry(t, appPreactEntry)

	// The HTML each server serves itself.
	direct := map[string]string{}
	for prefix, entry := range map[string]string{"a": vanilla, "b": preact} {
		c := connectDirect(t, nil, "node", entry, "--stdio")
		resp := c.mustRequest("resources/read", map[string]any{"uri": appUpstreamURI})
		direct[prefix] = appHTML(t, resp.Result, appUpstreamURI)
	}
	require.NotEqual(t, direct["a"], direct["b"], "the two servers serve different HTML")

	tokens := map[string]string{"host": randomToken(t), "narrow": randomToken(t), "partial": randomToken(t), "plain": randomToken(t)}
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, appsConfig(vanilla, preact))},
		env: []string{"HOST_TOKEN=" + tokens["host"], "NARROW_TOKEN=" + tokens["narrow"], "PARTIAL_TOKEN=" + tokens["partial"], "PLAIN_TOKEN=" + tokens["plain"]}})
	a.waitLoaded()

	exported := map[string]string{"a": "ui://a/get-time/mcp-app.html", "b": "ui://b/get-time/mcp-app.html"}
	steps := []map[string]any{
		{"op": "serverInfo"},
		{"op": "listTools"},
		{"op": "request", "method": "resources/list"},
		{"op": "request", "method": "resources/read", "params": map[string]any{"uri": exported["a"]}},
		{"op": "request", "method": "resources/read", "params": map[string]any{"uri": exported["b"]}},
		{"op": "request", "method": "resources/read", "params": map[string]any{"uri": appUpstreamURI}},
		{"op": "callTool", "name": "b_get-time"},
	}
	type view struct {
		caps      map[string]any
		tools     map[string]map[string]any // by name, the app tools
		resources []string                  // the ui:// URIs listed
		reads     map[string]json.RawMessage
		upstream  json.RawMessage // the error of reading the upstream's own URI
		call      json.RawMessage
	}
	run := func(t *testing.T, token string) view {
		results := runSDKClient(t, newMarker(), steps, "--http", a.url, "--header", "Authorization: Bearer "+token)
		var v view
		var info struct {
			Capabilities map[string]any `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(results[0], &info))
		v.caps = info.Capabilities
		var listed struct {
			Tools []map[string]any `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(results[1], &listed))
		v.tools = map[string]map[string]any{}
		for _, tool := range listed.Tools {
			if name, _ := tool["name"].(string); name == "a_get-time" || name == "b_get-time" {
				v.tools[name] = tool
			}
		}
		var list struct {
			Result struct {
				Resources []struct {
					URI string `json:"uri"`
				} `json:"resources"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(results[2], &list))
		for _, r := range list.Result.Resources {
			if len(r.URI) > 5 && r.URI[:5] == "ui://" {
				v.resources = append(v.resources, r.URI)
			}
		}
		v.reads = map[string]json.RawMessage{"a": results[3], "b": results[4]}
		v.upstream, v.call = results[5], results[6]
		return v
	}
	read := func(t *testing.T, step json.RawMessage, uri string) (html string, ok bool) {
		var r struct {
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal(step, &r))
		if len(r.Result) == 0 {
			return "", false
		}
		return appHTML(t, r.Result, uri), true
	}
	refused := func(t *testing.T, step json.RawMessage, what string) {
		var r struct {
			Result json.RawMessage `json:"result"`
			Error  struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(step, &r))
		assert.Empty(t, r.Result, what)
		assert.Contains(t, []int{-32002, -32602}, r.Error.Code, "%s: refused as an unknown resource", what)
	}

	t.Run("host", func(t *testing.T) {
		t.Parallel()
		v := run(t, tokens["host"])
		for _, prefix := range []string{"a", "b"} {
			tool := v.tools[prefix+"_get-time"]
			require.NotNil(t, tool, "%s_get-time is listed", prefix)
			meta, _ := tool["_meta"].(map[string]any)
			ui, _ := meta["ui"].(map[string]any)
			assert.Equal(t, exported[prefix], ui["resourceUri"], "%s_get-time points at its own server's app", prefix)
			assert.Equal(t, exported[prefix], meta["ui/resourceUri"], "the deprecated flat key stays equal to the current one")
			html, ok := read(t, v.reads[prefix], exported[prefix])
			if assert.True(t, ok, "%s's app reads back: %s", prefix, v.reads[prefix]) {
				assert.Equal(t, direct[prefix], html, "%s_get-time's app is the HTML its own server serves", prefix)
			}
		}
		assert.ElementsMatch(t, []string{exported["a"], exported["b"]}, v.resources, "each server's app resource is listed, under a name of its own")
		refused(t, v.upstream, "the upstream's own URI is no exported name")

		var call struct {
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(v.call, &call))
		if assert.Len(t, call.Result.Content, 1, "b_get-time runs on its server: %s", v.call) {
			assert.NotEmpty(t, call.Result.Content[0].Text)
		}

		ext, _ := v.caps["extensions"].(map[string]any)
		assert.Equal(t, map[string]any{
			"io.modelcontextprotocol/ui": map[string]any{},
			"com.example/future":         map[string]any{"level": float64(2), "x-unknown": []any{float64(1), map[string]any{"k": nil}}},
		}, ext, "the extensions a server declares are offered, their settings untouched")

		status := a.connectAs(tokens["host"]).callTool("mcp_status", map[string]any{})
		assert.NotContains(t, string(status.Result), "is also listed by server", "the two app resources do not collide")
	})
	t.Run("sessionless", func(t *testing.T) {
		// A 2026-07-28 request names the exported URI in Mcp-Name too; the
		// upstream is asked under its own.
		t.Parallel()
		const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}}`
		auth := http.Header{"Authorization": {"Bearer " + tokens["host"]}}
		r := modernRaw(t, a.url, "resources/read", exported["b"], `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":`+quoted(exported["b"])+`,`+meta+`}}`, auth)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		assert.Equal(t, direct["b"], appHTML(t, coreMessage(t, r).Result, exported["b"]))

		r = modernRaw(t, a.url, "server/discover", "", `{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{`+meta+`}}`, auth)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var discovered struct {
			Capabilities struct {
				Extensions map[string]any `json:"extensions"`
			} `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(coreMessage(t, r).Result, &discovered))
		assert.Contains(t, discovered.Capabilities.Extensions, "io.modelcontextprotocol/ui", "server/discover offers the extension too")
	})
	t.Run("subscribe", func(t *testing.T) {
		// The demo server serves any URI and sends an update for each it
		// is subscribed to: it is subscribed under its own URI, and the
		// update reaches the session under the exported one.
		t.Parallel()
		c := a.connectAs(tokens["host"])
		openSessionStream(t, a, c)
		const uri = "ui://ext/board/view.html"
		resp := c.mustRequest("resources/subscribe", map[string]any{"uri": uri})
		require.Empty(t, resp.Error)
		n, ok := c.waitNotification(func(n notification) bool { return n.Method == "notifications/resources/updated" }, updateWait)
		require.True(t, ok, "no notifications/resources/updated")
		assert.JSONEq(t, `{"uri":"`+uri+`"}`, string(n.Params))
	})
	t.Run("narrow", func(t *testing.T) {
		t.Parallel()
		v := run(t, tokens["narrow"])
		assert.Contains(t, v.tools, "a_get-time")
		assert.NotContains(t, v.tools, "b_get-time")
		assert.Equal(t, []string{exported["a"]}, v.resources, "a profile that hides server b hides its app resource")
		_, ok := read(t, v.reads["a"], exported["a"])
		assert.True(t, ok)
		refused(t, v.reads["b"], "b's app, outside the profile")
		assert.NotContains(t, v.caps, "extensions", "no server of the profile declares an extension")
	})
	t.Run("partial", func(t *testing.T) {
		t.Parallel()
		v := run(t, tokens["partial"])
		assert.Contains(t, v.tools, "a_get-time")
		assert.NotContains(t, v.tools, "b_get-time")
		assert.Equal(t, []string{exported["a"]}, v.resources, "a profile that hides b_get-time hides the app it points at")
		refused(t, v.reads["b"], "the app of a hidden tool")
	})
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		v := run(t, tokens["plain"])
		assert.ElementsMatch(t, []string{exported["a"], exported["b"]}, v.resources)
		html, ok := read(t, v.reads["b"], exported["b"])
		if assert.True(t, ok) {
			assert.Equal(t, direct["b"], html)
		}
		assert.NotContains(t, v.caps, "extensions", "neither app server declares an extension, so none is offered")
	})
}

// appHTML is the text of the one content of a resources/read result, which
// must name uri and the MCP App MIME type.
func appHTML(t *testing.T, result json.RawMessage, uri string) string {
	t.Helper()
	var read struct {
		Contents []struct {
			URI      string `json:"uri"`
			MimeType string `json:"mimeType"`
			Text     string `json:"text"`
		} `json:"contents"`
	}
	require.NoError(t, json.Unmarshal(result, &read), "%s", result)
	require.Len(t, read.Contents, 1, "%s", result)
	assert.Equal(t, uri, read.Contents[0].URI, "the content names the URI that was read")
	assert.Equal(t, "text/html;profile=mcp-app", read.Contents[0].MimeType)
	require.NotEmpty(t, read.Contents[0].Text)
	return read.Contents[0].Text
}
