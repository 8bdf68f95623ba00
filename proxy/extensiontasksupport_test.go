package proxy

import (
	"encoding/json"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/stretchr/testify/assert"
)

// TestExtensionTaskSupport: a 2025-11-25 session's tools/list gives the tools
// of a server of the tasks extension execution.taskSupport "optional" unless
// they say something of it already; every other tool, and every other byte,
// stay as they were.
func TestExtensionTaskSupport(t *testing.T) {
	st := initialState()
	st.catalog = catalog.Empty().
		WithServer("ext", []*catalog.Entry{
			{Exported: "x_plain", Server: "ext", Original: "plain", Raw: json.RawMessage(`{"name":"x_plain","inputSchema":{"type":"object"}}`)},
			{Exported: "x_hinted", Server: "ext", Original: "hinted", Raw: json.RawMessage(`{"name":"x_hinted", "execution": {"other": 1}}`)},
			{Exported: "x_says", Server: "ext", Original: "says", Raw: json.RawMessage(`{"name":"x_says","execution":{"taskSupport":"forbidden"}}`)},
		}).
		WithServer("old", []*catalog.Entry{
			{Exported: "o_tool", Server: "old", Original: "tool", Raw: json.RawMessage(`{"name":"o_tool"}`)},
		})
	body := []byte(`{"tools":[{"name":"x_plain","inputSchema":{"type":"object"}},{"name":"x_hinted", "execution": {"other": 1}},{"name":"x_says","execution":{"taskSupport":"forbidden"}},{"name":"o_tool"}]}`)

	assert.Equal(t, string(body), string(withExtensionTaskSupport(st, nil, body)), "no server of the extension: as it was")
	got := withExtensionTaskSupport(st, map[string]bool{"ext": true}, body)
	assert.Equal(t, `{"tools":[{"execution":{"taskSupport":"optional"},"name":"x_plain","inputSchema":{"type":"object"}},{"name":"x_hinted", "execution": {"taskSupport":"optional","other": 1}},{"name":"x_says","execution":{"taskSupport":"forbidden"}},{"name":"o_tool"}]}`, string(got))
}
