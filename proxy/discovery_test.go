package proxy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// discoveryConfig is a config of two demo servers behind search mode.
func discoveryConfig(always string, extra ...string) []byte {
	exe := os.Args[0]
	return []byte(fmt.Sprintf(`version: 1
discovery:
  mode: search
  always: %[4]s
servers:
  tools:
    truely-stateless: true
    command: '%[1]s'
    env: { %[2]s: tools }
    connect_timeout: 20s
    transform: [{prefix: demo_}]
  counter:
    command: '%[1]s'
    env: { %[2]s: counter }
    connect_timeout: 20s
    transform: [{prefix: ctr_}]
%[3]s`, exe, demoEnv, strings.Join(extra, ""), always))
}

// loadConfig parses config text as dir/mcp.yaml.
func loadConfig(t *testing.T, text []byte) *config.Workspace {
	t.Helper()
	ws, problems := config.LoadBytes(filepath.Join(t.TempDir(), "mcp.yaml"), text, nil)
	require.NotNil(t, ws, "problems: %v", problems)
	require.False(t, config.HasErrors(problems), "problems: %v", problems)
	return ws
}

// searchResult is what mcp_search_tools answers.
type searchResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Server      string          `json:"server"`
		} `json:"tools"`
	} `json:"structuredContent"`
	IsError bool `json:"isError"`
}

func search(t *testing.T, c *stdioClient, args map[string]any) searchResult {
	t.Helper()
	var r searchResult
	raw := c.callTool(searchToolName, args)
	require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
	return r
}

func (r searchResult) names() []string {
	var out []string
	for _, tool := range r.Structured.Tools {
		out = append(out, tool.Name)
	}
	return out
}

func TestDiscoverySearchMode(t *testing.T) {
	p := newTestProxy(t)
	report := reconcile(t, p, loadConfig(t, discoveryConfig("[demo_echo]")))
	require.Empty(t, report.Failed, "%v", report.Problems)
	c := connect(t, p)

	t.Run("tools/list holds the admin tools, the always matches and the pair", func(t *testing.T) {
		listed := toolNames(t, c.call("tools/list", nil).Result)
		assert.Equal(t, []string{"mcp_release", "mcp_status", searchToolName, callToolName, "demo_echo"}, listed)
	})

	t.Run("search finds every tool of the catalog", func(t *testing.T) {
		r := search(t, c, map[string]any{"query": "add two numbers"})
		require.False(t, r.IsError, "%+v", r)
		require.NotEmpty(t, r.Structured.Tools)
		first := r.Structured.Tools[0]
		assert.Equal(t, "demo_add", first.Name)
		assert.Equal(t, "tools", first.Server)
		assert.Equal(t, "Adds two numbers.", first.Description)
		def, ok := p.Catalog().Lookup("demo_add")
		require.True(t, ok)
		var whole struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		require.NoError(t, json.Unmarshal(def.Raw, &whole))
		assert.Equal(t, compactJSON(t, whole.InputSchema), compactJSON(t, first.InputSchema), "the schema as the server wrote it")
		require.Len(t, r.Content, 1)
		assert.Contains(t, r.Content[0].Text, "demo_add (server tools): Adds two numbers.")
		assert.Contains(t, r.Content[0].Text, "arguments: a (number, required), b (number, required)")

		assert.Equal(t, []string{"ctr_increment"}, search(t, c, map[string]any{"query": "ctr_increment", "limit": 1}).names())
		assert.Equal(t, []string{"mcp_release"}, search(t, c, map[string]any{"query": "release a leased instance", "limit": 1}).names(),
			"admin tools are found too: tools/list would show them in mode all")
		for _, r := range search(t, c, map[string]any{"query": "search call tool", "limit": 50}).names() {
			assert.NotContains(t, []string{searchToolName, callToolName}, r, "the pair does not find itself")
		}
		assert.Len(t, search(t, c, map[string]any{"query": "returns", "limit": 2}).names(), 2)
		none := search(t, c, map[string]any{"query": "zebra quantum"})
		assert.Empty(t, none.Structured.Tools)
		assert.Contains(t, none.Content[0].Text, "No tool matches")
	})

	t.Run("bad search arguments", func(t *testing.T) {
		for _, args := range []map[string]any{{}, {"query": "  "}, {"query": "x", "limit": 0}, {"query": "x", "limit": 2.5}, {"query": 3}} {
			r := search(t, c, args)
			assert.True(t, r.IsError, "%v", args)
		}
		assert.LessOrEqual(t, len(search(t, c, map[string]any{"query": "a", "limit": 500}).names()), maxSearchLimit)

		// A query over the bounds is refused with what is too long, and not
		// echoed back.
		huge := strings.Repeat("zebra ", 20000)
		r := search(t, c, map[string]any{"query": huge})
		assert.True(t, r.IsError)
		require.Len(t, r.Content, 1)
		assert.Contains(t, r.Content[0].Text, "mcp_search_tools: query is 120000 bytes, over the 2048 a search reads")
		assert.Less(t, len(r.Content[0].Text), 300)
	})

	t.Run("mcp_call_tool answers exactly what the tool answers", func(t *testing.T) {
		direct := c.callTool("demo_add", map[string]any{"a": 2, "b": 40})
		through := c.callTool(callToolName, map[string]any{"name": "demo_add", "arguments": map[string]any{"a": 2, "b": 40}})
		assert.JSONEq(t, string(direct), string(through))

		// A stateful server: the call takes the session's lease, with its
		// reminder, and later calls reach the same instance.
		first := decodeResult(t, c.callTool(callToolName, map[string]any{"name": "ctr_increment", "arguments": map[string]any{"by": 5}}))
		assert.Equal(t, json.Number("5"), first.Structured["value"])
		require.Len(t, first.Content, 2, "the first lease carries the reminder")
		assert.Contains(t, first.Content[1].Text, "mcp_release")
		again := decodeResult(t, c.callTool(callToolName, map[string]any{"name": "ctr_get"}))
		assert.Equal(t, json.Number("5"), again.Structured["value"], "no arguments is fine, and the lease holds")

		failed := c.call("tools/call", map[string]any{"name": callToolName, "arguments": map[string]any{"name": "demo_fail", "arguments": map[string]any{"message": "boom"}}})
		directFail := c.call("tools/call", map[string]any{"name": "demo_fail", "arguments": map[string]any{"message": "boom"}})
		assert.JSONEq(t, string(directFail.Result), string(failed.Result))
	})

	t.Run("an unknown name is answered with the closest ones", func(t *testing.T) {
		r := decodeResult(t, c.callTool(callToolName, map[string]any{"name": "demo_ecoh", "arguments": map[string]any{"text": "x"}}))
		assert.True(t, r.IsError)
		require.NotEmpty(t, r.Content)
		assert.Contains(t, r.Content[0].Text, `unknown tool "demo_ecoh"`)
		assert.Contains(t, r.Content[0].Text, "Closest: demo_echo")
	})

	t.Run("bad call arguments", func(t *testing.T) {
		for _, args := range []map[string]any{{}, {"name": ""}, {"name": "demo_echo", "arguments": "text"}, {"name": callToolName, "arguments": map[string]any{"name": "demo_echo"}}} {
			r := decodeResult(t, c.callTool(callToolName, args))
			assert.True(t, r.IsError, "%v", args)
		}
	})

	t.Run("hidden tools stay callable by name", func(t *testing.T) {
		direct := decodeResult(t, c.callTool("demo_echo", map[string]any{"text": "hi"}))
		require.NotEmpty(t, direct.Content)
		assert.Equal(t, "hi", direct.Content[0].Text)
		add := decodeResult(t, c.callTool("demo_add", map[string]any{"a": 1, "b": 1}))
		assert.Equal(t, json.Number("2"), add.Structured["sum"])
	})
}

func TestDiscoveryFollowsCommits(t *testing.T) {
	p := newTestProxy(t)
	require.Empty(t, reconcile(t, p, loadConfig(t, discoveryConfig("[]"))).Failed)
	c := connect(t, p)
	assert.NotContains(t, search(t, c, map[string]any{"query": "fid_rich"}).names(), "fid_rich")

	// A server added by a reload is found at once.
	more := fmt.Sprintf(`  fidelity:
    truely-stateless: true
    command: '%s'
    env: { %s: fidelity }
    transform: [{prefix: fid_}]
`, os.Args[0], demoEnv)
	report := reconcile(t, p, loadConfig(t, discoveryConfig("[]", more)))
	require.Empty(t, report.Failed, "%v", report.Problems)
	assert.Contains(t, search(t, c, map[string]any{"query": "fid_rich"}).names(), "fid_rich")
	changes := len(c.waitNotifications("notifications/tools/list_changed", 1))

	// Changing only discovery.always changes what tools/list holds: clients
	// are told, though the catalog is the same.
	report = reconcile(t, p, loadConfig(t, discoveryConfig("['fid_*']", more)))
	assert.True(t, report.Changed)
	c.waitNotifications("notifications/tools/list_changed", changes+1)
	assert.Contains(t, toolNames(t, c.call("tools/list", nil).Result), "fid_rich")
	assert.False(t, reconcile(t, p, loadConfig(t, discoveryConfig("['fid_*']", more))).Changed, "an identical reload changes nothing")

	// Back to mode all: the pair goes, every tool is listed again, and a
	// call to the pair is an unknown tool.
	all := strings.Replace(string(discoveryConfig("[]", more)), "mode: search", "mode: all", 1)
	report = reconcile(t, p, loadConfig(t, []byte(all)))
	assert.True(t, report.Changed)
	listed := toolNames(t, c.call("tools/list", nil).Result)
	assert.NotContains(t, listed, searchToolName)
	assert.Contains(t, listed, "demo_echo")
	assert.Contains(t, listed, "fid_rich")
	resp := c.call("tools/call", map[string]any{"name": searchToolName, "arguments": map[string]any{"query": "echo"}})
	assert.NotEmpty(t, resp.Error, "no search tool in mode all")
}

func TestDiscoveryNameOwnedByAServer(t *testing.T) {
	// A server that exports a tool named mcp_call_tool keeps it (first owner
	// wins); search mode then offers mcp_search_tools alone.
	cat := catalog.Empty().WithServer("odd", []*catalog.Entry{{Exported: callToolName, Server: "odd", Original: "call", Raw: json.RawMessage(`{"name":"mcp_call_tool"}`)}})
	entries := discoveryEntries(config.Discovery{Mode: config.DiscoverySearch}, cat)
	require.Len(t, entries, 1)
	assert.Equal(t, searchToolName, entries[0].Exported)
	assert.Empty(t, discoveryEntries(config.Discovery{Mode: config.DiscoveryAll}, cat))
}

func TestArgumentsText(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"head":{"type":["number","null"]},"opts":{"anyOf":[{"type":"string"}]}},"required":["path"]}`)
	assert.Equal(t, "path (string, required), head (number|null), opts", argumentsText(schema))
	assert.Equal(t, "", argumentsText(json.RawMessage(`{"type":"object"}`)))
	assert.Equal(t, "", argumentsText(json.RawMessage(`[`)))
}

func TestSummary(t *testing.T) {
	assert.Equal(t, "First paragraph, on one line.", summary("  First paragraph,\n  on one line.\n\nSecond paragraph."))
	long := strings.Repeat("word ", 100)
	s := summary(long)
	assert.LessOrEqual(t, len(s), summaryLen+len(" …"))
	assert.True(t, strings.HasSuffix(s, "word …"), s)
}

func TestDiscoverySeesOnlyAdmittedTools(t *testing.T) {
	p := newTestProxy(t)
	text := strings.Replace(string(discoveryConfig("[]")), "transform: [{prefix: demo_}]", "transform: [{prefix: demo_}]\n    tools: {blacklist: [add]}", 1)
	require.Empty(t, reconcile(t, p, loadConfig(t, []byte(text))).Failed)
	c := connect(t, p)
	found := search(t, c, map[string]any{"query": "add two numbers", "limit": 50}).names()
	assert.NotContains(t, found, "demo_add", "a filtered tool is never found")
	r := decodeResult(t, c.callTool(callToolName, map[string]any{"name": "demo_add", "arguments": map[string]any{"a": 1, "b": 2}}))
	assert.True(t, r.IsError, "nor called")
}
