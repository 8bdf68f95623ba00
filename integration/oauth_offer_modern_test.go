package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	data := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_ = readSSE(bytes.NewReader(raw), func(d []byte) bool { data = d; return true })
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &msg), "HTTP %d: %s", resp.StatusCode, raw)
	return msg.Result, msg.Error
}

// TestOAuthLoginOfferToModernClient: protocol 2026-07-28 removed the
// elicitationId of URL-mode elicitations and
// notifications/elicitation/complete; its client learns that an
// out-of-band interaction is over by sending the request again. A
// 2026-07-28 client that declared URL-mode elicitation is offered the login
// with no elicitationId, and is sent no completion; once the person logs
// in, the same call goes through. A 2025-11-25 client of the same
// aggregator is still offered the login with its elicitationId.
func TestOAuthLoginOfferToModernClient(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "")
	up := startSecuredUpstream(t, as)
	_, env := loginHome(t)
	a, _ := startSecuredAggregator(t, up, env)

	// An older client, to compare and to see the server start.
	old := newElicitingClient(t, a, "url")
	listen(t, a, old)

	urlCaps := map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	result, offer := modernCallAnswer(t, a.url, downstreamToken, "sec_whoami", urlCaps)
	require.NotEmpty(t, offer, "the call of a tool whose server waits for a login fails: %s", result)
	var rpcErr struct {
		Code int `json:"code"`
		Data struct {
			Elicitations []map[string]any `json:"elicitations"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(offer, &rpcErr))
	assert.Equal(t, -32042, rpcErr.Code, "%s", offer)
	require.Len(t, rpcErr.Data.Elicitations, 1, "%s", offer)
	el := rpcErr.Data.Elicitations[0]
	assert.NotContains(t, el, "elicitationId", "2026-07-28 has no elicitationId: %s", offer)
	assert.Equal(t, "url", el["mode"])
	url, _ := el["url"].(string)
	require.True(t, strings.HasPrefix(url, as.issuer+"/authorize?"), "the authorization URL: %s", offer)

	// The older client is offered the same login, with its id.
	oldOffer := old.callTool("sec_whoami", map[string]any{})
	var oldErr struct {
		Code int `json:"code"`
		Data struct {
			Elicitations []map[string]any `json:"elicitations"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(oldOffer.Error, &oldErr), "%s", oldOffer.Result)
	require.Len(t, oldErr.Data.Elicitations, 1, "%s", oldOffer.Error)
	assert.Equal(t, url, oldErr.Data.Elicitations[0]["url"], "one login under way, one URL")
	assert.NotEmpty(t, oldErr.Data.Elicitations[0]["elicitationId"], "2025-11-25 keeps the elicitationId: %s", oldOffer.Error)

	resp, err := http.Get(url) // the person approves in the browser
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, ok := old.waitNotification(func(n notification) bool { return n.Method == "notifications/tools/list_changed" }, startTimeout)
	require.True(t, ok, "no tools/list_changed once the server started; stderr:\n%s", a.log)

	// The 2026-07-28 client calls again, and the call goes through.
	result, rerr := modernCallAnswer(t, a.url, downstreamToken, "sec_whoami", urlCaps)
	require.Empty(t, rerr, "the call after the login: %s", rerr)
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(result, &res), "%s", result)
	require.NotEmpty(t, res.Content, "%s", result)
	assert.Equal(t, oauthSubject, res.Content[0].Text)
}
