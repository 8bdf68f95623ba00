package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// TestPlan: a server's tools become entries under their exported names,
// renamed byte for byte, apps pointed at their exported URIs; a name
// another server owns and a malformed definition are problems, not entries.
func TestPlan(t *testing.T) {
	other := catalogOf([]*Entry{entry("b", "taken", `{"name":"taken"}`)})
	s := &config.Server{ID: "a"}
	names := []string{"echo", "taken", "broken", "app", "sql", "job", "never"}
	raws := map[string]json.RawMessage{
		"echo":   json.RawMessage(`{"name":"echo", "description":"Echo."}`),
		"taken":  json.RawMessage(`{"name":"taken"}`),
		"broken": json.RawMessage(`["not an object"]`),
		"app":    json.RawMessage(`{"name":"app","_meta":{"ui":{"resourceUri":"ui://main"}}}`),
		"sql":    json.RawMessage(`{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`),
		"job":    json.RawMessage(`{"name":"job","execution":{"taskSupport":"required"}}`),
		"never":  json.RawMessage(`{"name":"never","execution":{"taskSupport":"forbidden"},"description":"taskSupport optional"}`),
	}
	plan, entries := Plan(s, names, raws, other, "")
	exported := map[string]*Entry{}
	for _, e := range entries {
		assert.Equal(t, "a", e.Server)
		exported[e.Original] = e
	}
	require.Contains(t, exported, "echo")
	assert.Equal(t, `{"name":"echo", "description":"Echo."}`, string(exported["echo"].Raw), "only the name may change, byte for byte")
	require.Contains(t, exported, "app")
	assert.Equal(t, "ui://a/main", exported["app"].App)
	require.Contains(t, exported, "sql")
	assert.True(t, exported["sql"].ParamHeaders, "its schema marks a parameter for a header")
	assert.False(t, exported["echo"].ParamHeaders)
	require.Contains(t, exported, "job")
	assert.True(t, exported["job"].TaskSupport, "its execution.taskSupport lets it run as a task")
	assert.False(t, exported["never"].TaskSupport, "forbidden")
	assert.False(t, exported["echo"].TaskSupport, "no execution member")
	assert.NotContains(t, exported, "broken")
	var broken bool
	for _, p := range plan.Problems {
		if p.Tool == "broken" {
			broken = true
			assert.Contains(t, p.Message, "malformed definition skipped")
		}
	}
	assert.True(t, broken, "the malformed definition is a problem: %+v", plan.Problems)
	if e, ok := exported["taken"]; ok {
		assert.NotEqual(t, "taken", e.Exported, "b owns the name taken")
	}
}
