package integration

import (
	"encoding/json"
	"path"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everythingWhitelist selects the server-everything tools the tests export.
var everythingWhitelist = []string{"echo", "get-*", "trigger-*"}

// everythingConfig is the server entry (under id "every", prefix ev_) for the pinned
// server-everything.
func everythingConfig(entry string) string {
	return everythingYAML("every", entry, statelessServer, "transform: [{prefix: ev_}]", "tools: {whitelist: ['echo', 'get-*', 'trigger-*']}")
}

// everythingYAML is the config of the server name under servers: the
// settings given, one a line, and server-everything at entry on stdio.
func everythingYAML(name, entry string, settings ...string) string {
	return serverYAML(name, append(settings, "command: node", "args: ["+quoted(entry)+", stdio]")...)
}

// matchesAny reports whether name matches one of the wildcard patterns.
func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// exportedTools maps the tools that survive a whitelist to their definitions as the
// aggregator should export them: unchanged but for the prefixed name.
func exportedTools(t testing.TB, tools []json.RawMessage, whitelist []string, prefix string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, raw := range tools {
		tool := decodeObject(t, raw)
		name, _ := tool["name"].(string)
		if whitelist != nil && !matchesAny(name, whitelist) {
			continue
		}
		tool["name"] = prefix + name
		out[prefix+name] = tool
	}
	return out
}

// upstreamTools maps the non-admin tools of a listing to their definitions, and checks
// that the admin tools come first.
func upstreamTools(t testing.TB, tools []json.RawMessage) map[string]map[string]any {
	t.Helper()
	names := toolNames(t, tools)
	require.GreaterOrEqual(t, len(names), len(adminTools), "tools: %v", names)
	assert.Equal(t, adminTools, names[:len(adminTools)], "admin tools come first")
	return exportedTools(t, tools[len(adminTools):], nil, "")
}

// everythingCalls are compared between a direct connection and the aggregator.
var everythingCalls = []struct {
	tool string
	args map[string]any
}{
	{"echo", map[string]any{"message": "hello through the aggregator"}},
	{"get-sum", map[string]any{"a": 2, "b": 40.5}},
	{"get-tiny-image", map[string]any{}},
	{"get-structured-content", map[string]any{"location": "Chicago"}},
	{"get-resource-links", map[string]any{"count": 3}},
	{"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 2}},
}

// creationTime matches the wall-clock time server-everything writes into each resource
// it creates ("... created at 5:46:24 AM"): two calls a second apart differ only there.
var creationTime = regexp.MustCompile(`created at [0-9:]+(\s?[AP]M)?`)

// withoutCreationTimes replaces the creation times in every string of v.
func withoutCreationTimes(v any) any {
	switch v := v.(type) {
	case string:
		return creationTime.ReplaceAllString(v, "created at <time>")
	case []any:
		for i := range v {
			v[i] = withoutCreationTimes(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = withoutCreationTimes(v[k])
		}
	}
	return v
}

// TestServerEverything puts the reference server-everything behind the aggregator and
// compares tools and results with a direct connection to it.
func TestServerEverything(t *testing.T) {
	t.Parallel()
	entry := nodeEntry(t, everythingEntry)

	direct := connectDirect(t, nil, "node", entry, "stdio")
	want := exportedTools(t, direct.listTools(), everythingWhitelist, "ev_")
	require.Contains(t, want, "ev_echo")
	wantResults := make([]json.RawMessage, len(everythingCalls))
	for i, call := range everythingCalls {
		wantResults[i] = direct.callToolResult(call.tool, call.args)
	}

	eachTransport(t, func(t *testing.T, tr transport) {
		a := serveConfig(t, tr, "version: 1\nservers:\n"+everythingConfig(entry))
		a.waitLoaded()
		c := a.connect()

		assert.Equal(t, want, upstreamTools(t, c.listTools()), "tools through the aggregator")
		for i, call := range everythingCalls {
			got := c.callToolResult("ev_"+call.tool, call.args)
			assert.Equal(t, withoutCreationTimes(decodeJSON(t, wantResults[i])), withoutCreationTimes(decodeJSON(t, got)),
				"result of %s", call.tool)
		}
	})
}

// TestServerMemory uses the reference server-memory, a stateful server leased per
// session, through the aggregator.
func TestServerMemory(t *testing.T) {
	t.Parallel()
	entry := nodeEntry(t, memoryEntry)
	eachTransport(t, func(t *testing.T, tr transport) {
		memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
		a := serveConfig(t, tr, `version: 1
servers:
  memory:
    command: node
    args: [`+quoted(entry)+`]
    env: {MEMORY_FILE_PATH: `+quoted(memoryFile)+`}
    transform: [{prefix: mem_}]
`)
		a.waitLoaded()
		c := a.connect()

		entity := map[string]any{"name": "Ada Lovelace", "entityType": "person", "observations": []any{"wrote the first program"}}
		created := c.callToolResult("mem_create_entities", map[string]any{"entities": []any{entity}})
		var r struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(created, &r))
		assertJSONEqual(t, mustJSON(t, map[string]any{"entities": []any{entity}}), r.StructuredContent)
		// The first call of a session to a leased server carries the release reminder.
		require.Len(t, r.Content, 2, "created: %s", created)
		assert.Contains(t, r.Content[1].Text, "mcp_release")

		graph := c.callToolResult("mem_read_graph", map[string]any{})
		r.StructuredContent = nil
		require.NoError(t, json.Unmarshal(graph, &r))
		assertJSONEqual(t, mustJSON(t, map[string]any{"entities": []any{entity}, "relations": []any{}}), r.StructuredContent)
		require.Len(t, r.Content, 1, "only the first call carries the reminder: %s", graph)
	})
}
