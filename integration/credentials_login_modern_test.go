package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerUserLoginModernClient: a sessionless 2026-07-28 client whose
// caller has not logged in to a per-user server is answered input_required,
// the login's URL elicitation (no elicitationId) among its inputRequests. A
// retry that answers nothing is offered the login again; the retry that
// accepts waits for the login, which the person finishes in the browser
// meanwhile, and then the call goes through with the caller's new token. The
// used requestState is refused; another caller is offered a login of their
// own, and declining it ends the call; a client without URL elicitation
// gets the link in the error.
func TestPerUserLoginModernClient(t *testing.T) {
	t.Parallel()
	g := startPerUserGateway(t)
	urlCaps := map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	call := func(token string, caps map[string]any, extra map[string]any) map[string]any {
		p := map[string]any{"name": "whoami", "arguments": map[string]any{}}
		for k, v := range extra {
			p[k] = v
		}
		return bridgePostAs(t, g.a.url, token, caps, "tools/call", "whoami", "conv-1", p)
	}
	offerOf := func(resp map[string]any) (state, key, url string) {
		t.Helper()
		state, key = inputState(t, resp)
		el := resp["result"].(map[string]any)["inputRequests"].(map[string]any)[key].(map[string]any)
		assert.Equal(t, "elicitation/create", el["method"])
		params := el["params"].(map[string]any)
		assert.NotContains(t, params, "elicitationId", "2026-07-28 has no elicitationId: %v", params)
		assert.Equal(t, "url", params["mode"])
		assert.Contains(t, params["message"], `"crm"`)
		url, _ = params["url"].(string)
		require.True(t, strings.HasPrefix(url, g.as.issuer+"/"), "the authorization server's URL: %v", params)
		return state, key, url
	}

	state, key, url := offerOf(call(g.aliceToken, urlCaps, nil))
	// Not answered yet: offered again, the same login under way.
	state2, key2, url2 := offerOf(call(g.aliceToken, urlCaps, map[string]any{"requestState": state, "inputResponses": map[string]any{}}))
	assert.Equal(t, key, key2)
	assert.Equal(t, url, url2, "one login under way, one URL")

	// The client accepts (its user opened the link) and retries at once;
	// the retry waits while the person logs in.
	accepted := make(chan map[string]any, 1)
	go func() {
		accepted <- call(g.aliceToken, urlCaps, map[string]any{"requestState": state2,
			"inputResponses": map[string]any{key2: map[string]any{"action": "accept"}}})
	}()
	resp, err := http.Get(url) // the browser
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	done := <-accepted
	result, ok := done["result"].(map[string]any)
	require.True(t, ok, "the call after the login: %v", done)
	assert.Equal(t, "complete", result["resultType"])
	var seen map[string][]string
	require.NoError(t, json.Unmarshal([]byte(resultText(t, mustJSON(t, result))), &seen))
	require.Len(t, seen["Authorization"], 1)
	upToken, _ := strings.CutPrefix(seen["Authorization"][0], "Bearer ")
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(upToken, claims, func(*jwt.Token) (any, error) { return &g.as.store.key.PublicKey, nil })
	require.NoError(t, err)
	assert.Equal(t, oauthSubject, claims["sub"], "the token of alice's login")

	// Used: refused.
	assert.Contains(t, refusedBecause(t, call(g.aliceToken, urlCaps, map[string]any{"requestState": state2,
		"inputResponses": map[string]any{key2: map[string]any{"action": "accept"}}})), "no longer held")

	// Bob is offered his own login; declining it ends the call.
	bobState, bobKey, bobURL := offerOf(call(g.bobToken, urlCaps, nil))
	assert.NotEqual(t, url, bobURL, "bob's login is his own")
	declined := call(g.bobToken, urlCaps, map[string]any{"requestState": bobState,
		"inputResponses": map[string]any{bobKey: map[string]any{"action": "decline"}}})
	e, ok := declined["error"].(map[string]any)
	require.True(t, ok, "%v", declined)
	assert.Contains(t, e["message"], "not accepted")

	// Without URL elicitation: the link, in the error.
	plain := call(g.bobToken, map[string]any{"elicitation": map[string]any{}}, nil)
	e, ok = plain["error"].(map[string]any)
	require.True(t, ok, "%v", plain)
	assert.Contains(t, e["message"], "open "+g.as.issuer+"/")

	for name, secret := range map[string]string{"alice's token": g.aliceToken, "bob's token": g.bobToken, "the upstream token": upToken} {
		assert.NotContains(t, g.a.log.String(), secret, "%s reached the log", name)
	}
}

// TestPerUserLoginSDK2Client: the TypeScript SDK v2 client, pinned to
// 2026-07-28, is offered alice's login as a URL-mode elicitation (no
// elicitationId); its handler opens the link as a browser would and
// accepts, and the SDK's retry gets the result of the call, made with
// alice's new token.
func TestPerUserLoginSDK2Client(t *testing.T) {
	t.Parallel()
	nodeEntry(t, sdk2Entry)
	g := startPerUserGateway(t)
	out := runInputClientAs(t, "2", g.a.url, g.aliceToken, map[string]any{
		"capabilities": []string{"elicitation-url"},
		"answers":      map[string]any{"elicitation": []any{map[string]any{"browse": true, "action": "accept"}}},
		"steps":        []any{map[string]any{"op": "callTool", "name": "whoami"}},
	})
	require.Len(t, out.Results, 1)
	require.Nil(t, out.Results[0].Error, "%+v", out.Results[0].Error)
	require.Len(t, out.Asked, 1, "the login was offered once")
	var params map[string]any
	require.NoError(t, json.Unmarshal(out.Asked[0].Params, &params))
	assert.Equal(t, "url", params["mode"])
	assert.NotContains(t, params, "elicitationId")
	assert.True(t, strings.HasPrefix(params["url"].(string), g.as.issuer+"/"), "%v", params)
	var seen map[string][]string
	require.NoError(t, json.Unmarshal([]byte(resultText(t, out.Results[0].Result)), &seen))
	require.Len(t, seen["Authorization"], 1, "the call reached the server with a token")
	upToken, _ := strings.CutPrefix(seen["Authorization"][0], "Bearer ")
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(upToken, claims, func(*jwt.Token) (any, error) { return &g.as.store.key.PublicKey, nil })
	require.NoError(t, err)
	assert.Equal(t, oauthSubject, claims["sub"])
}
