package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionsPerClientAreCapped: an http.auth client holding
// --max-sessions-per-client sessions gets 429 with Retry-After and an error
// that names the cap and what frees a place; another client still opens
// sessions, and once the first ends one with DELETE it opens another.
func TestSessionsPerClientAreCapped(t *testing.T) {
	t.Parallel()
	alice, bob := randomToken(t), randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nhttp: {auth: {tokens: {alice: {env: ALICE_TOKEN}, bob: {env: BOB_TOKEN}}}}\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))},
		flags:   []string{"--max-sessions-per-client", "2"},
		env:     []string{"ALICE_TOKEN=" + alice, "BOB_TOKEN=" + bob},
	})
	a.waitLoaded()
	initialize := []byte(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"cap-test","version":"1"}}}`)
	as := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }

	var ids []string
	for i := range 2 {
		r := corePost(t, a.url, "", initialize, as(alice))
		require.Equal(t, http.StatusOK, r.status, "session %d: %s", i, r.body)
		ids = append(ids, r.header.Get("Mcp-Session-Id"))
	}
	r := corePost(t, a.url, "", initialize, as(alice))
	assert.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	assert.NotEmpty(t, r.header.Get("Retry-After"))
	assert.Empty(t, r.header.Get("Mcp-Session-Id"), "a refused initialize opens no session")
	var refused struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body, &refused), "%s", r.body)
	assert.JSONEq(t, "7", string(refused.ID))
	assert.NotZero(t, refused.Error.Code)
	for _, hint := range []string{"maximum of 2 open sessions", "--max-sessions-per-client", "DELETE"} {
		assert.Contains(t, refused.Error.Message, hint)
	}
	_, logged := a.log.waitLine(func(line string) bool {
		return strings.Contains(line, "refused a new session: the client holds its maximum") && strings.Contains(line, "alice")
	}, callTimeout, a.exited)
	assert.True(t, logged, "%s", a.log)

	r = corePost(t, a.url, "", initialize, as(bob))
	assert.Equal(t, http.StatusOK, r.status, "another client is not held back: %s", r.body)

	req, err := http.NewRequest(http.MethodDelete, a.url, nil)
	require.NoError(t, err)
	req.Header.Set("Mcp-Session-Id", ids[0])
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	req.Header.Set("Authorization", "Bearer "+alice)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r = corePost(t, a.url, "", initialize, as(alice))
	assert.Equal(t, http.StatusOK, r.status, "a session ended, so one more opens: %s", r.body)
}

// TestSessionsPerClientFlagIsChecked: a negative cap is a command line that
// cannot be used, and the flag is in serve's help.
func TestSessionsPerClientFlagIsChecked(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "serve", "--http", "127.0.0.1:0", "--max-sessions-per-client", "-1")
	assert.Equal(t, 2, res.code, "%s", res.stderr)
	assert.Contains(t, res.stderr, "--max-sessions-per-client")
	res = runCLI(t, "serve", "--help")
	assert.Contains(t, res.stdout+res.stderr, "-max-sessions-per-client")
}
