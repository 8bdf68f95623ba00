package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpstreamProtocolViolations runs upstreams that break the protocol in
// ways a real server does (a byte order mark before its output, a protocol
// version the handshake cannot negotiate, cursors that loop, tools without a
// valid inputSchema, results that are no object, ids written as strings,
// malformed error objects) beside a healthy one.
// Each is dealt with on its own: what can be read is read, what cannot fails at
// once with an error that names the server and what it did, a server that cannot
// work is not started again and again, and the healthy one serves throughout.
func TestUpstreamProtocolViolations(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		serverEntry("demo", "demo_", statelessServer, demoServer("tools"))+
		serverEntry("bom", "bom_", statelessServer, demoServer("misbehave", "bom"))+
		serverEntry("oldver", "oldver_", statelessServer, demoServer("misbehave", "init-version", "1999-01-01"))+
		serverEntry("loop", "loop_", statelessServer, demoServer("misbehave", "cursor-cycle"))+
		serverEntry("nullres", "nullres_", statelessServer, demoServer("misbehave", "null-result"))+
		serverEntry("strid", "strid_", statelessServer, demoServer("misbehave", "string-id"), "request_timeout: 60s")+
		serverEntry("baderr", "baderr_", statelessServer, demoServer("misbehave", "bad-error"), "request_timeout: 60s")+
		serverEntry("schemas", "schemas_", statelessServer, demoServer("misbehave", "bad-schemas")))
	a.waitLoaded()
	c := a.connect()

	names := toolNames(t, c.listTools())
	assert.Subset(t, names, []string{"demo_echo", "bom_ping_tool", "nullres_ping_tool", "strid_ping_tool", "baderr_ping_tool", "schemas_ping_tool"})
	// A client that checks tools/list against the MCP schema would reject the
	// whole list over one of these, and every server's tools with it.
	assert.NotContains(t, names, "schemas_no_schema")
	assert.NotContains(t, names, "schemas_array_schema")
	relLogLine(t, a, startTimeout, "left out (its inputSchema is missing)", "server=schemas", "names=no_schema")
	relLogLine(t, a, startTimeout, `left out (its inputSchema does not have \"type\": \"object\")`, "server=schemas", "names=array_schema")
	for _, n := range names {
		assert.False(t, strings.HasPrefix(n, "oldver_") || strings.HasPrefix(n, "loop_"), "tool %s of a server that cannot work is exported", n)
	}

	assert.Equal(t, []string{"pong"}, relTexts(t, relResult(t, relCall(c, "bom_ping_tool", map[string]any{}, nil))),
		"a server whose output starts with a byte order mark is served")

	for _, tc := range []struct{ tool, want string }{
		{"nullres_ping_tool", `server "nullres": its result for tools/call is null, not a JSON object`},
		{"strid_ping_tool", `with the id "`},
		{"baderr_ping_tool", `server "baderr" sent a malformed response`},
	} {
		o := relCall(c, tc.tool, map[string]any{}, nil)
		assert.Contains(t, relErrorMessage(t, o), tc.want, tc.tool)
		relAssertFast(t, o, tc.tool)
	}

	problems := strings.Join(relStatus(t, c).Problems, "\n")
	assert.Contains(t, problems, `server "oldver": could not start: initialize: the server answered with protocol version "1999-01-01"`)
	assert.Contains(t, problems, "set protocol:")
	// What a server's tool list left out is a problem of that server too,
	// where an operator looks (mcp_status, the status page, tools).
	assert.Contains(t, problems, `warning: `)
	assert.Contains(t, problems, `server "schemas": tools/list: 1 item(s) left out, as they break the MCP schema (its inputSchema is missing): no_schema`)
	assert.Contains(t, problems, `server "schemas": tools/list: 1 item(s) left out, as they break the MCP schema (its inputSchema does not have "type": "object"): array_schema`)
	assert.Contains(t, problems, `server "loop": could not start: tools/list: page 3 names the cursor "a" of an earlier page as the next one; the server's pagination loops`)
	for _, server := range []string{"oldver", "loop"} {
		assert.Zero(t, relCountLines(a, `msg="starting server failed; retrying"`, "server="+server),
			"server %s is started again though it answers the same every time", server)
	}

	assert.Equal(t, []string{"hi"}, relTexts(t, relResult(t, relCall(c, "demo_echo", map[string]any{"text": "hi"}, nil))),
		"the healthy server serves beside them")
}

// TestUpstreamDeepResult: a response nested deeper than JSON parsers take
// (10,000 levels, encoding/json's bound) fails its call at once with an
// error that says so, instead of leaving it to wait for request_timeout for
// an answer that already came; a deeply nested result within the bound
// passes through as it came, and the server goes on serving.
func TestUpstreamDeepResult(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, stdioTransport, "version: 1\nservers:\n"+
		serverEntry("deep", "deep_", statelessServer, demoServer("misbehave", "deep-result"), "request_timeout: 60s"))
	a.waitLoaded()
	c := a.connect()

	o := relCall(c, "deep_ping_tool", map[string]any{"depth": 20000}, nil)
	msg := relErrorMessage(t, o)
	assert.Contains(t, msg, `server "deep" sent a malformed response`)
	assert.Contains(t, msg, "nested more than 10000 levels deep")
	relAssertFast(t, o, "a call answered too deeply nested")

	res := relResult(t, relCall(c, "deep_ping_tool", map[string]any{"depth": 500}, nil))
	var r struct {
		StructuredContent struct {
			Deep json.RawMessage `json:"deep"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(res, &r))
	assert.Equal(t, strings.Repeat("[", 500)+strings.Repeat("]", 500), string(r.StructuredContent.Deep))

	assert.Equal(t, []string{"pong"}, relTexts(t, relResult(t, relCall(c, "deep_ping_tool", map[string]any{}, nil))))
}

// TestUpstreamInvalidUTF8IsRepaired: an upstream that writes text that is
// not UTF-8 (Latin-1 in a tool's description, bytes of a file in a result)
// or a \u escape of half a surrogate pair (an emoji cut in two) breaks no
// client: MCP messages are UTF-8, and a client that decodes strictly would
// refuse the whole tools/list, every server's tools with it. The invalid
// bytes and lone surrogates reach the client as U+FFFD, as encoding/json
// reads them, and the rest as it came.
func TestUpstreamInvalidUTF8IsRepaired(t *testing.T) {
	t.Parallel()
	a := serveConfig(t, httpTransport, "version: 1\nservers:\n"+
		serverEntry("demo", "demo_", statelessServer, demoServer("tools"))+
		serverEntry("latin", "latin_", statelessServer, demoServer("misbehave", "bad-utf8")))
	a.waitLoaded()
	c := a.connect()
	session := coreSessionOf(t, c)

	list := corePost(t, a.url, session, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), nil)
	require.Equal(t, http.StatusOK, list.status, "%s", list.body)
	assert.True(t, utf8.Valid(list.body), "tools/list is not UTF-8: %q", list.body)
	var tools struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(coreMessage(t, list).Result, &tools))
	descriptions := map[string]string{}
	for _, tool := range tools.Tools {
		descriptions[tool.Name] = tool.Description
	}
	assert.NotContains(t, string(list.body), `\ud83d`, "a lone surrogate was served")
	assert.Equal(t, "caf\uFFFD cr\uFFFDme \uFFFD", descriptions["latin_latin1"])
	assert.Contains(t, descriptions, "demo_echo")

	call := corePost(t, a.url, session, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"latin_ping_tool","arguments":{}}}`), nil)
	require.Equal(t, http.StatusOK, call.status, "%s", call.body)
	assert.True(t, utf8.Valid(call.body), "the result is not UTF-8: %q", call.body)
	assert.NotContains(t, string(call.body), `\ud83d`, "a lone surrogate was served")
	assert.Equal(t, "caf\uFFFD \uFFFD\uFFFD \uFFFD", firstText(t, coreMessage(t, call).Result))
}
