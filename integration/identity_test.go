package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// identityConfig is a gateway with OAuth and a static token side by side,
// a counter whose instances are leased per principal, and a profile chosen
// by the OAuth client every user of it shares.
func identityConfig(issuer, profiles, extra string) string {
	return fmt.Sprintf(`version: 1
http:
  auth:
    tokens:
      svc-bot: { env: SVC_BOT_TOKEN }
    oauth:
      issuer: %s
      audience: %s
profiles:
  shared-app: { servers: [counter] }
%sservers:
  demo:
    truely-stateless: true
    %s
    transform: [{prefix: demo_}]
  counter:
    %s
    transform: [{prefix: counter_}]
%s`, issuer, gatewayAudience, profiles, demoServer("tools"), demoServer("counter"), extra)
}

// counterOf reads the value of a demo counter tool's result.
func counterOf(t *testing.T, raw json.RawMessage) int {
	t.Helper()
	var res struct {
		Structured struct {
			Value int `json:"value"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	return res.Structured.Value
}

// TestIdentityUsersOfOneClientShareNothing: two users (two subjects) of one
// OAuth client are two principals: each has its own sessionless counter,
// its own named lease, and its own sessions, which the other's token
// cannot reach; a subject named like a static token's client is not that
// client. The profile chosen by the shared client applies to both.
func TestIdentityUsersOfOneClientShareNothing(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	svcToken := randomToken(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, identityConfig(is.url, "", fmt.Sprintf("audit: {to: %q}\n", auditPath)))},
		env: []string{"SVC_BOT_TOKEN=" + svcToken}})
	a.waitLoaded()
	alice := is.mint(t, jwt.MapClaims{"sub": "alice", "client_id": "shared-app"})
	bob := is.mint(t, jwt.MapClaims{"sub": "bob", "client_id": "shared-app"})
	botSubject := is.mint(t, jwt.MapClaims{"sub": "svc-bot", "client_id": nil})

	t.Run("sessionless counters", func(t *testing.T) {
		for i := 1; i <= 3; i++ {
			require.Equal(t, i, modernCallAs(t, a.url, alice, "counter_increment", ""))
		}
		assert.Equal(t, 1, modernCallAs(t, a.url, bob, "counter_increment", ""), "bob's counter is not alice's")
		assert.Equal(t, 4, modernCallAs(t, a.url, alice, "counter_increment", ""))
	})
	t.Run("named leases", func(t *testing.T) {
		for i := 1; i <= 2; i++ {
			require.Equal(t, i, modernCallAs(t, a.url, alice, "counter_increment", "conv-1"))
		}
		assert.Equal(t, 1, modernCallAs(t, a.url, bob, "counter_increment", "conv-1"), "the same lease name of another user is another lease")
		assert.Equal(t, 3, modernCallAs(t, a.url, alice, "counter_increment", "conv-1"))
	})
	t.Run("namespaces apart", func(t *testing.T) {
		for i := 1; i <= 2; i++ {
			require.Equal(t, i, modernCallAs(t, a.url, svcToken, "counter_increment", ""))
		}
		assert.Equal(t, 1, modernCallAs(t, a.url, botSubject, "counter_increment", ""),
			"a subject named svc-bot is not the static token's client svc-bot")
		assert.Equal(t, 3, modernCallAs(t, a.url, svcToken, "counter_increment", ""))
	})
	t.Run("sessions", func(t *testing.T) {
		ac := a.connectAs(alice)
		require.Equal(t, 1, counterOf(t, ac.callToolResult("counter_increment", map[string]any{})))
		require.Equal(t, 2, counterOf(t, ac.callToolResult("counter_increment", map[string]any{})))
		session := ac.wire.(*httpWire).session
		call := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "counter_increment", "arguments": map[string]any{}}}
		resp, body := rawPost(t, a.url, call, map[string]string{"Authorization": "Bearer " + bob,
			"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "bob's token must not drive alice's session: %s", body)
		bc := a.connectAs(bob)
		assert.Equal(t, 1, counterOf(t, bc.callToolResult("counter_increment", map[string]any{})), "bob's session has its own instance")
		assert.Equal(t, 3, counterOf(t, ac.callToolResult("counter_increment", map[string]any{})), "alice's state is untouched")
	})
	t.Run("the client's profile applies to each user", func(t *testing.T) {
		for _, tok := range []string{alice, bob} {
			assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "counter_increment", "counter_get", "counter_pid"},
				toolNames(t, a.connectAs(tok).listTools()))
		}
		assert.Contains(t, toolNames(t, a.connectAs(botSubject).listTools()), "demo_echo", "a token naming no client has no client's profile")
	})
	log := a.log.String()
	for _, tok := range []string{alice, bob, botSubject, svcToken} {
		assert.NotContains(t, log, tok, "a token reached the log")
	}

	// The audit log names each call's principal: issuer, subject, client.
	lines := auditLines(t, auditPath, 17) // the calls above that reached a tool
	seen := map[string]bool{}
	for _, l := range lines {
		p, _ := l["principal"].(map[string]any)
		seen[fmt.Sprint(p["kind"], " ", p["issuer"], " ", p["subject"], " ", p["client"])] = true
	}
	assert.True(t, seen[fmt.Sprint("subject ", is.url, " alice shared-app")], "%v", seen)
	assert.True(t, seen[fmt.Sprint("subject ", is.url, " bob shared-app")], "%v", seen)
	assert.True(t, seen[fmt.Sprint("subject ", is.url, " svc-bot <nil>")], "%v", seen)
	assert.True(t, seen["client <nil> <nil> svc-bot"], "%v", seen)
	raw, err := os.ReadFile(auditPath)
	require.NoError(t, err)
	for _, tok := range []string{alice, bob, botSubject, svcToken} {
		assert.NotContains(t, string(raw), tok, "a token reached the audit log")
	}
}

// TestIdentityProfileByClaim: a profile chosen by a groups claim applies to
// every user whose token holds that group, whatever client they use; a
// user without it keeps the client's profile, and a profile naming a
// subject beats both. The ops views refuse a user a claim's profile
// narrows.
func TestIdentityProfileByClaim(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{writeConfig(t, identityConfig(is.url, `  auditors: { match: { claim: groups, value: auditors }, servers: [demo], tools: ['demo_e*'] }
  carol: { match: { subject: carol } }
`, `policy:
  - name: auditors-no-env
    when: 'has(principal.claims.groups) && "auditors" in principal.claims.groups && tool == "demo_env"'
    action: deny
    message: auditors may not read the environment
  - name: ask-erin
    when: 'principal.subject == "erin" && principal.client == "other-app" && tool == "demo_echo"'
    action: ask
`))}, env: []string{"SVC_BOT_TOKEN=" + randomToken(t)}})
	a.waitLoaded()
	auditor := is.mint(t, jwt.MapClaims{"sub": "dave", "client_id": "other-app", "groups": []string{"staff", "auditors"}})
	plain := is.mint(t, jwt.MapClaims{"sub": "erin", "client_id": "other-app", "groups": []string{"staff"}})
	carol := is.mint(t, jwt.MapClaims{"sub": "carol", "client_id": "shared-app", "groups": []string{"auditors"}})

	assert.ElementsMatch(t, []string{"mcp_release", "mcp_status", "demo_echo", "demo_env"}, toolNames(t, a.connectAs(auditor).listTools()),
		"the auditors profile, chosen by the groups claim")
	assert.Contains(t, toolNames(t, a.connectAs(plain).listTools()), "demo_add", "no profile for a user outside the group")
	assert.Contains(t, toolNames(t, a.connectAs(carol).listTools()), "demo_add", "carol's own profile beats her client's and her group's")

	c := a.connectAs(auditor)
	resp := c.callTool("counter_increment", map[string]any{})
	require.NotNil(t, resp.Error, "a tool outside the claim's profile is unknown to its users")
	assert.Equal(t, "hello", firstText(t, c.callToolResult("demo_echo", map[string]any{"text": "hello"})))

	// Policy rules read the principal's claims, subject and client.
	text, isErr := policyText(t, c.callToolResult("demo_env", map[string]any{}))
	assert.True(t, isErr)
	assert.Contains(t, text, `policy rule "auditors-no-env"`)
	assert.Contains(t, text, "auditors may not read the environment")

	asked := make(chan string, 1)
	erin := a.newClientAs(plain)
	erin.inbox.onRequest = func(method string, params json.RawMessage) (string, string) {
		var p struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(params, &p)
		asked <- p.Message
		return `{"action":"accept"}`, ""
	}
	erin.initializeWith(map[string]any{"elicitation": map[string]any{}})
	assert.Equal(t, "hi", firstText(t, erin.callToolResult("demo_echo", map[string]any{"text": "hi"})))
	assert.Contains(t, <-asked, fmt.Sprintf(`Allow demo_echo for subject:%q "erin" (client other-app)?`, is.url))
}

// TestIdentityProfileEditEndsUsersLeases: a reload that takes a leased
// server out of the profile an OAuth user's subject chooses ends that
// user's leases of it (their session's and a sessionless conversation's),
// while another user, whose profile by a claim still admits the server,
// keeps theirs.
func TestIdentityProfileEditEndsUsersLeases(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	profiles := func(aliceServers string) string {
		return "  alice-p: { match: { subject: alice }, servers: [" + aliceServers + "] }\n" +
			"  staff: { match: { claim: groups, value: staff }, servers: [counter, demo] }\n"
	}
	path := writeConfig(t, identityConfig(is.url, profiles("counter, demo"), ""))
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path}, env: []string{"SVC_BOT_TOKEN=" + randomToken(t)}})
	a.waitLoaded()
	alice := is.mint(t, jwt.MapClaims{"sub": "alice", "client_id": "shared-app"})
	bob := is.mint(t, jwt.MapClaims{"sub": "bob", "client_id": "other-app", "groups": []string{"staff"}})

	ac, bc := a.connectAs(alice), a.connectAs(bob)
	require.Equal(t, 1, counterOf(t, ac.callToolResult("counter_increment", map[string]any{})))
	require.Equal(t, 1, modernCallAs(t, a.url, alice, "counter_increment", "conv-1"))
	require.Equal(t, 1, counterOf(t, bc.callToolResult("counter_increment", map[string]any{})))
	assert.False(t, a.log.containsLine(`msg="lease revoked"`))

	r := &reloadRig{t: t, a: a, path: path}
	r.save(identityConfig(is.url, profiles("demo"), ""))
	r.waitReload()
	_, ok := a.log.waitLine(func(line string) bool {
		return strings.Count(a.log.String(), `msg="lease revoked" server=counter`) >= 2
	}, reloadWait, a.exited)
	require.True(t, ok, "alice's two leases of counter end with the edit:\n%s", a.log)
	assert.Equal(t, 2, strings.Count(a.log.String(), `msg="lease revoked"`), "bob's lease is not ended")
	assert.Equal(t, 2, counterOf(t, bc.callToolResult("counter_increment", map[string]any{})), "bob's lease kept its state")
	assert.Equal(t, 1, leaseStatusOf(t, bc).Servers[0].Leased, "one lease of counter is left: bob's")
}
