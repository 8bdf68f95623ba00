package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/tasks"
)

// TestTaskErrorsNameTheClientsID: an upstream's error about a task says the
// client's id of it, in its message and its data, never the upstream's.
func TestTaskErrorsNameTheClientsID(t *testing.T) {
	e := &tasks.Entry{ID: "task-0123abcd", UpstreamID: "48af24dad088da83"}
	in := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Task 48af24dad088da83 has no result stored",
		Data: json.RawMessage(`{"taskId":"48af24dad088da83"}`)}
	out := taskIDsToClient(in, e)
	assert.Equal(t, "Task task-0123abcd has no result stored", out.Message)
	assert.JSONEq(t, `{"taskId":"task-0123abcd"}`, string(out.Data))
	assert.Equal(t, in.Code, out.Code)
	assert.Equal(t, "Task 48af24dad088da83 has no result stored", in.Message, "the upstream's error is not changed in place")
}

// TestUnknownToolNamesServersAwaitingLogin: an unknown tool's error names the servers
// of the caller's profile that wait for a login, whose tools are missing until then,
// and no others.
func TestUnknownToolNamesServersAwaitingLogin(t *testing.T) {
	st := &state{failed: map[string]failedServer{
		"lin":   {why: "not logged in; run `mcp-aggregator login lin`"},
		"other": {why: "could not start: exec: not found"},
	}}
	hint := st.awaitingLogin("")
	assert.Contains(t, hint, `server "lin" waits for a login (mcp-aggregator login lin`)
	assert.NotContains(t, hint, "other")
	st.profiles = map[string]*profile{"alice": {servers: map[string]bool{"other": true}}}
	assert.Empty(t, st.awaitingLogin("alice"), "a server outside the profile is not named")
}

// TestUnknownResourceSaysWhy: a URI no server lists, with no server to ask, is -32002
// with the reason that fits: no server offers resources (as while the first load runs).
func TestUnknownResourceSaysWhy(t *testing.T) {
	p := newTestProxy(t)
	p.MarkLoaded()
	resp := handle(t, p, "", "resources/read", `{"uri":"x://y"}`)
	require.NotNil(t, resp.Error)
	assert.Equal(t, codeResourceNotFound, resp.Error.Code)
	assert.Contains(t, resp.Error.Message, "no server offers resources")

	// 2026-07-28 has no -32002: the URI is an invalid param there.
	resp = handle(t, p, "2026-07-28", "resources/read", `{"uri":"x://y"}`)
	require.NotNil(t, resp.Error)
	assert.Equal(t, jsonrpc.CodeInvalidParams, resp.Error.Code)
	assert.Contains(t, resp.Error.Message, "no server offers resources")
}
