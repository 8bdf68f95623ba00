package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modernCallAnswer calls tool sessionlessly (2026-07-28) as the client
// holding token, declaring caps, and returns the response message: its
// result and error, raw.
func modernCallAnswer(t *testing.T, url, token, tool string, caps map[string]any) (result, rpcErr json.RawMessage) {
	t.Helper()
	return modernCallAnswerIn(t, url, token, tool, caps, "")
}

// modernCallAnswerIn is modernCallAnswer within the conversation lease
// ("": the anonymous one).
func modernCallAnswerIn(t *testing.T, url, token, tool string, caps map[string]any, lease string) (result, rpcErr json.RawMessage) {
	t.Helper()
	meta := modernMeta()
	meta["io.modelcontextprotocol/clientCapabilities"] = caps
	if lease != "" {
		meta["mcp-aggregator/lease"] = lease
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": meta}})
	require.NoError(t, err)
	req, err := newModernRequest(ctx, url, token, "tools/call", tool, body)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, data := readReply(t, resp)
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &msg), "HTTP %d: %s", resp.StatusCode, raw)
	return msg.Result, msg.Error
}

// TestOAuthLoginOfferToModernClient: protocol 2026-07-28 removed the
// elicitationId of URL-mode elicitations,
// notifications/elicitation/complete and the -32042 error. A 2026-07-28
// client that declared URL-mode elicitation and calls a tool of a server
// that waits for a shared login (so no server exports it) is answered
// input_required, the login's URL elicitation (no elicitationId) among its
// inputRequests. Declining ends the call; the retry that accepts waits
// while the person logs in and the server starts, and then the call goes
// through; an accepted call of a tool the started server does not export
// gets the unknown-tool error. A 2025-11-25 client of the same aggregator
// is still offered the login as -32042, with its elicitationId.
func TestOAuthLoginOfferToModernClient(t *testing.T) {
	t.Parallel()
	as, a := startAwaitingLogin(t)

	urlCaps := map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	call := func(tool string, extra map[string]any) map[string]any {
		p := map[string]any{"name": tool, "arguments": map[string]any{}}
		for k, v := range extra {
			p[k] = v
		}
		return bridgePostAs(t, a.url, downstreamToken, urlCaps, "tools/call", tool, "", p)
	}
	offerOf := func(tool string) (state, key, url string) {
		t.Helper()
		resp := call(tool, nil)
		state, key = inputState(t, resp)
		el := resp["result"].(map[string]any)["inputRequests"].(map[string]any)[key].(map[string]any)
		assert.Equal(t, "elicitation/create", el["method"])
		params := el["params"].(map[string]any)
		assert.NotContains(t, params, "elicitationId", "2026-07-28 has no elicitationId: %v", params)
		assert.Equal(t, "url", params["mode"])
		assert.Contains(t, params["message"], fmt.Sprintf(`unknown tool %q`, tool))
		assert.Contains(t, params["message"], `MCP server "secured" needs you to log in`)
		url, _ = params["url"].(string)
		require.True(t, strings.HasPrefix(url, as.issuer+"/authorize?"), "the authorization URL: %v", params)
		return state, key, url
	}
	answer := func(tool, state, key, action string) map[string]any {
		return call(tool, map[string]any{"requestState": state, "inputResponses": map[string]any{key: map[string]any{"action": action}}})
	}

	// Declined: the call ends, and nothing waits.
	state, key, url := offerOf("sec_whoami")
	declined := answer("sec_whoami", state, key, "decline")
	e, ok := declined["error"].(map[string]any)
	require.True(t, ok, "a declined login ends the call: %v", declined)
	assert.Contains(t, e["message"], "not accepted")

	// An older client is offered the same login, as -32042 with its id.
	old := newElicitingClient(t, a, "url")
	oldOffer := old.callTool("sec_whoami", map[string]any{})
	var oldErr struct {
		Code int `json:"code"`
		Data struct {
			Elicitations []map[string]any `json:"elicitations"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(oldOffer.Error, &oldErr), "%s", oldOffer.Result)
	assert.Equal(t, -32042, oldErr.Code, "%s", oldOffer.Error)
	require.Len(t, oldErr.Data.Elicitations, 1, "%s", oldOffer.Error)
	assert.Equal(t, url, oldErr.Data.Elicitations[0]["url"], "one login under way, one URL")
	assert.NotEmpty(t, oldErr.Data.Elicitations[0]["elicitationId"], "2025-11-25 keeps the elicitationId: %s", oldOffer.Error)

	// Two calls accept, one of a tool the server does not have; both
	// retries wait while the person logs in and the server starts.
	state, key, url2 := offerOf("sec_whoami")
	assert.Equal(t, url, url2, "one login under way, one URL")
	missingState, missingKey, _ := offerOf("sec_nosuchtool")
	accepted := make(chan map[string]any, 1)
	missing := make(chan map[string]any, 1)
	go func() { accepted <- answer("sec_whoami", state, key, "accept") }()
	go func() { missing <- answer("sec_nosuchtool", missingState, missingKey, "accept") }()
	resp, err := http.Get(url) // the person approves in the browser
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	done := <-accepted
	result, ok := done["result"].(map[string]any)
	require.True(t, ok, "the call after the login: %v; stderr:\n%s", done, a.log)
	assert.Equal(t, "complete", result["resultType"])
	assert.Equal(t, oauthSubject, resultText(t, mustJSON(t, result)))

	unknown := <-missing
	e, ok = unknown["error"].(map[string]any)
	require.True(t, ok, "a tool the started server does not export: %v", unknown)
	assert.Equal(t, json.Number("-32602"), e["code"])
	assert.Contains(t, e["message"], `unknown tool "sec_nosuchtool"`)
	assert.NotContains(t, e["message"], "login", "nothing waits for a login any more")

	// Used: refused.
	assert.Contains(t, refusedBecause(t, answer("sec_whoami", state, key, "accept")), "no longer held")
	// Called again, the tool is there.
	again := call("sec_whoami", nil)
	result, ok = again["result"].(map[string]any)
	require.True(t, ok, "%v", again)
	assert.Equal(t, oauthSubject, resultText(t, mustJSON(t, result)))
	assert.NotContains(t, a.log.String(), downstreamToken, "the client's token reached the log")
}

// TestOAuthLoginOfferedForMissingToolsSDK2Client: the TypeScript SDK v2
// client, pinned to 2026-07-28, calls a tool of a server that waits for a
// shared login; it is offered the login as a URL-mode elicitation (no
// elicitationId), its handler opens the link as a browser would and
// accepts, and the SDK's retry gets the result of the call, made once the
// server started.
func TestOAuthLoginOfferedForMissingToolsSDK2Client(t *testing.T) {
	t.Parallel()
	nodeEntry(t, sdk2Entry)
	as, a := startAwaitingLogin(t)
	out := runInputClientAs(t, "2", a.url, downstreamToken, map[string]any{
		"capabilities": []string{"elicitation-url"},
		"answers":      map[string]any{"elicitation": []any{map[string]any{"browse": true, "action": "accept"}}},
		"steps":        []any{map[string]any{"op": "callTool", "name": "sec_whoami"}},
	})
	require.Len(t, out.Results, 1)
	require.Nil(t, out.Results[0].Error, "%+v; stderr:\n%s", out.Results[0].Error, a.log)
	require.Len(t, out.Asked, 1, "the login was offered once")
	var params map[string]any
	require.NoError(t, json.Unmarshal(out.Asked[0].Params, &params))
	assert.Equal(t, "url", params["mode"])
	assert.NotContains(t, params, "elicitationId")
	assert.True(t, strings.HasPrefix(params["url"].(string), as.issuer+"/authorize?"), "%v", params)
	assert.Equal(t, oauthSubject, resultText(t, out.Results[0].Result))
}
