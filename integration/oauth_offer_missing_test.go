package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server that waits for a login exports no tools, so no call of one of its
// tools can fail for want of that login. A client that declared URL-mode
// elicitation and calls a tool no server exports is offered the login
// instead (-32042); once it is done, the server starts, its tools appear,
// and the call goes through. A client that cannot be offered a login gets
// the unknown-tool error, which names the server and the login command.
func TestOAuthLoginOfferedForMissingTools(t *testing.T) {
	t.Parallel()
	as, a := startAwaitingLogin(t)

	plain := a.newClient()
	plain.wire.(*httpWire).hc.Transport = withAuthorization{base: plain.wire.(*httpWire).hc.Transport}
	plain.initialize()
	refused := plain.callTool("sec_whoami", map[string]any{})
	var unknown struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(refused.Error, &unknown), "a call of a missing tool fails: %s", refused.Result)
	assert.Equal(t, -32602, unknown.Code)
	assert.Contains(t, unknown.Message, `server "secured" waits for a login (mcp-aggregator login secured`)

	e := newElicitingClient(t, a, "url")
	listen(t, a, e)
	assert.ElementsMatch(t, []string{"mcp_release", "mcp_status"}, toolNames(t, e.listTools()))

	message, el := loginOfferOf(t, e.callTool("sec_whoami", map[string]any{}), as.issuer)
	assert.Contains(t, message, `unknown tool "sec_whoami"`)
	assert.Contains(t, message, `MCP server "secured" needs you to log in`)

	approveLogin(t, a, e, el) // the person approves in the browser
	_, ok := e.waitNotification(func(n notification) bool { return n.Method == "notifications/tools/list_changed" }, startTimeout)
	require.True(t, ok, "no tools/list_changed once the server started; stderr:\n%s", a.log)
	assert.Contains(t, toolNames(t, e.listTools()), "sec_whoami")
	assert.Equal(t, oauthSubject, firstText(t, e.callToolResult("sec_whoami", map[string]any{})))

	// With nothing waiting for a login, a missing tool is just that.
	typo := e.callTool("sec_whoamii", map[string]any{})
	require.NoError(t, json.Unmarshal(typo.Error, &unknown), "%s", typo.Result)
	assert.Equal(t, -32602, unknown.Code)
	assert.NotContains(t, unknown.Message, "login")
}
