package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Both keys of a tool's app pointer are exported under the server's name
// for it, and every other byte of the definition stays.
func TestAppToolMeta(t *testing.T) {
	raw := json.RawMessage(`{"name":"get-time","_meta":{"ui":{"resourceUri":"ui://get-time/mcp-app.html","csp":{"x":1}},"ui/resourceUri":"ui://get-time/mcp-app.html","other":"ui://keep"}}`)
	got, app := AppTool("a", raw)
	assert.Equal(t, "ui://a/get-time/mcp-app.html", app)
	assert.JSONEq(t, `{"name":"get-time","_meta":{"ui":{"resourceUri":"ui://a/get-time/mcp-app.html","csp":{"x":1}},"ui/resourceUri":"ui://a/get-time/mcp-app.html","other":"ui://keep"}}`, string(got))

	flat, app := AppTool("b", json.RawMessage(`{"name":"t","_meta":{"ui/resourceUri":"ui://main"}}`))
	assert.Equal(t, "ui://b/main", app, "the deprecated flat key alone still points at the app")
	assert.JSONEq(t, `{"name":"t","_meta":{"ui/resourceUri":"ui://b/main"}}`, string(flat))

	plain := json.RawMessage(`{"name":"t","_meta":{"ui":{"resourceUri":"https://x"}}}`)
	got, app = AppTool("a", plain)
	assert.Equal(t, "", app)
	assert.Equal(t, string(plain), string(got), "a tool that is no app's is left as it is")
}
