package integration

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// userLoginOutput is what node/userloginclient.mjs writes.
type userLoginOutput struct {
	Fatal string `json:"fatal"`
	First struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
			Data struct {
				Elicitations []struct {
					Mode, ElicitationID, URL string
				} `json:"elicitations"`
			} `json:"data"`
		} `json:"error"`
	} `json:"first"`
	Browser struct {
		Status   int    `json:"status"`
		FinalURL string `json:"finalURL"`
	} `json:"browser"`
	Completed bool `json:"completed"`
	Second    struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	} `json:"second"`
}

// perUserGateway is a gateway with static tokens for alice and bob in front
// of server crm, whose tool calls need each caller's own login (auth:
// {type: oauth, per_user: true}), made through the gateway's own callback
// (the authorization server approves at once).
type perUserGateway struct {
	a                         *aggregator
	as                        *authServer
	aliceToken, bobToken, key string
	home, auditPath           string
	port                      int
}

// startPerUserGateway starts a perUserGateway.
func startPerUserGateway(t *testing.T) *perUserGateway {
	t.Helper()
	as := startAuthServer(t, false, "")
	as.store.lifetime = time.Hour
	var up *whoami
	prm := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": up.url, "authorization_servers": []string{as.issuer}})
	}
	// Tool calls need a token of the provider's; initialize and lists do
	// not (the connection's own requests name no caller).
	up = newGuardedWhoami(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			return true
		}
		raw, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		_, err := jwt.Parse(raw, func(*jwt.Token) (any, error) { return &as.store.key.PublicKey, nil },
			jwt.WithIssuer(as.issuer), jwt.WithValidMethods([]string{"RS256"}))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+strings.TrimSuffix(up.url, "/mcp")+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return false
		}
		return true
	}, map[string]http.HandlerFunc{"/.well-known/oauth-protected-resource/mcp": prm, "/.well-known/oauth-protected-resource": prm})

	home, env := loginHome(t)
	key := hex.EncodeToString(bytes.Repeat([]byte{0x5c}, 32))
	aliceToken, bobToken := randomToken(t), randomToken(t)
	port := freePort(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	a := startAggregator(t, httpTransport, aggregatorOptions{
		env:   append(env, "VAULT_KEY="+key, "ALICE_TOKEN="+aliceToken, "BOB_TOKEN="+bobToken),
		flags: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)},
		configs: []string{writeConfig(t, fmt.Sprintf(`version: 1
audit: {to: %q}
http:
  auth:
    tokens:
      alice: {env: ALICE_TOKEN}
      bob: {env: BOB_TOKEN}
    user_logins:
      key: {env: VAULT_KEY}
      callback: http://127.0.0.1:%d/oauth/callback
servers:
  crm:
    url: %s
    auth: {type: oauth, per_user: true}
`, auditPath, port, up.url))}})
	a.waitLoaded()
	return &perUserGateway{a: a, as: as, aliceToken: aliceToken, bobToken: bobToken, key: key, home: home, auditPath: auditPath, port: port}
}

// TestPerUserLogin: a server with auth: {type: oauth, per_user: true}
// behind a gateway with static tokens. Alice's TypeScript SDK client calls
// a tool, is sent a URL elicitation, logs in through the gateway's own
// callback (zitadel's provider approves at once), is told the login is
// complete, and her second call reaches the server with her token; bob is
// still asked to log in himself. The login is stored sealed, and no token
// reaches the log.
func TestPerUserLogin(t *testing.T) {
	t.Parallel()
	nodeEntry(t, "@modelcontextprotocol/sdk/package.json")
	g := startPerUserGateway(t)
	a, as, aliceToken, bobToken, port, auditPath, home, key := g.a, g.as, g.aliceToken, g.bobToken, g.port, g.auditPath, g.home, g.key
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(nodeDir, "userloginclient.mjs"), a.url, aliceToken, "whoami")
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Run(), "userloginclient stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	var out userLoginOutput
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	require.Empty(t, out.Fatal)

	require.NotNil(t, out.First.Error, "the first call needs a login: %s", stdout.String())
	assert.Equal(t, -32042, out.First.Error.Code)
	require.Len(t, out.First.Error.Data.Elicitations, 1)
	el := out.First.Error.Data.Elicitations[0]
	assert.Equal(t, "url", el.Mode)
	assert.True(t, strings.HasPrefix(el.URL, as.issuer+"/"), "the URL is the authorization server's: %s", el.URL)
	assert.Equal(t, http.StatusOK, out.Browser.Status)
	assert.True(t, strings.HasPrefix(out.Browser.FinalURL, fmt.Sprintf("http://127.0.0.1:%d/oauth/callback?", port)),
		"the browser came back to the gateway's callback: %s", out.Browser.FinalURL)
	assert.True(t, out.Completed, "notifications/elicitation/complete named the elicitation")
	require.NotEmpty(t, out.Second.Result, "the second call went through: %s", out.Second.Error)
	var seen map[string][]string
	require.NoError(t, json.Unmarshal([]byte(resultText(t, out.Second.Result)), &seen))
	require.Len(t, seen["Authorization"], 1)
	upToken, _ := strings.CutPrefix(seen["Authorization"][0], "Bearer ")
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(upToken, claims, func(*jwt.Token) (any, error) { return &as.store.key.PublicKey, nil })
	require.NoError(t, err)
	assert.Equal(t, oauthSubject, claims["sub"], "the token of alice's login")

	// Bob has logged in to nothing: he is offered a login of his own; a
	// client of his without URL elicitation gets the link in the error.
	plain := a.connectAs(bobToken)
	resp := plain.callTool("whoami", map[string]any{})
	require.NotEmpty(t, resp.Error, "bob's call does not use alice's login")
	var linkErr struct{ Message string }
	require.NoError(t, json.Unmarshal(resp.Error, &linkErr))
	assert.Contains(t, linkErr.Message, "open "+as.issuer+"/", "the error carries the login's URL")
	bob := a.newClientAs(bobToken)
	bob.initializeWith(map[string]any{"elicitation": map[string]any{"url": map[string]any{}}})
	resp = bob.callTool("whoami", map[string]any{})
	require.NotEmpty(t, resp.Error, "bob's call does not use alice's login")
	var bobErr struct{ Code int }
	require.NoError(t, json.Unmarshal(resp.Error, &bobErr))
	assert.Equal(t, -32042, bobErr.Code)

	// Alice's login left an audit line naming her; bob's offered logins,
	// never finished, left none.
	var logins []map[string]any
	require.Eventually(t, func() bool {
		raw, _ := os.ReadFile(auditPath)
		logins = nil
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["event"] == "login" {
				delete(m, "time")
				delete(m, "duration_ms")
				logins = append(logins, m)
			}
		}
		return len(logins) > 0
	}, callTimeout, 20*time.Millisecond, "the audit log holds alice's login")
	assert.Equal(t, []map[string]any{{"event": "login", "method": "login", "server": "crm", "outcome": "ok",
		"principal": map[string]any{"kind": "client", "client": "alice"}, "bytes_in": float64(0), "bytes_out": float64(0)}}, logins)
	auditText, err := os.ReadFile(auditPath)
	require.NoError(t, err)
	assert.NotContains(t, string(auditText), upToken, "the audit log holds no token")

	// The login is stored sealed: one file, no token in it.
	files, err := os.ReadDir(filepath.Join(home, ".config", "mcp-aggregator", "per-user"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	sealed, err := os.ReadFile(filepath.Join(home, ".config", "mcp-aggregator", "per-user", files[0].Name()))
	require.NoError(t, err)
	assert.NotContains(t, string(sealed), upToken)
	assert.NotContains(t, string(sealed), "refresh")

	// POST /oauth/logout ends the caller's own login, and only theirs: the
	// next call of alice's is offered a login again.
	logout := func(token, query string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/oauth/logout%s", port, query), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	code, body := logout(bobToken, "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"loggedOut": []any{}, "notLoggedIn": []any{"crm"}}, body, "bob had no login")
	code, _ = logout(aliceToken, "?server=nope")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = logout("not-a-token", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body = logout(aliceToken, "?server=crm")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, []any{"crm"}, body["loggedOut"])
	files, err = os.ReadDir(filepath.Join(home, ".config", "mcp-aggregator", "per-user"))
	require.NoError(t, err)
	assert.Empty(t, files, "alice's stored login is gone")
	resp = a.connectAs(aliceToken).callTool("whoami", map[string]any{})
	require.NotEmpty(t, resp.Error, "alice logged out: her call needs a login again")
	require.NoError(t, json.Unmarshal(resp.Error, &linkErr))
	assert.Contains(t, linkErr.Message, "open "+as.issuer+"/")

	for name, secret := range map[string]string{"alice's token": aliceToken, "bob's token": bobToken, "the upstream token": upToken, "the vault key": key} {
		assert.NotContains(t, a.log.String(), secret, "%s reached the log", name)
	}
}
