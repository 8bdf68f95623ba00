package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// whoami is a remote MCP upstream (mcp-go over streamable HTTP) whose tool
// whoami answers with the headers its request came with, as JSON: what an
// upstream learns of the caller the gateway sends it.
type whoami struct {
	url string
	mu  sync.Mutex
	all []http.Header // every request's headers, initialize and lists included
}

type headersKey struct{}

func newWhoami(t *testing.T) *whoami { return newGuardedWhoami(t, nil, nil) }

// newGuardedWhoami is newWhoami with guard, when set, deciding whether a
// request (its body read) is served, and extra paths served beside /mcp.
func newGuardedWhoami(t *testing.T, guard func(w http.ResponseWriter, r *http.Request, body []byte) bool, extra map[string]http.HandlerFunc) *whoami {
	t.Helper()
	up := server.NewMCPServer("whoami", "1.0.0", server.WithToolCapabilities(true))
	up.AddTool(mcp.NewTool("whoami", mcp.WithDescription("Tells the headers of its request.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h, _ := ctx.Value(headersKey{}).(http.Header)
			b, err := json.Marshal(map[string][]string{"X-User-Id": h.Values("X-User-Id"), "X-Email": h.Values("X-Email"),
				"Authorization": h.Values("Authorization")})
			if err != nil {
				return nil, err
			}
			return mcp.NewToolResultText(string(b)), nil
		})
	w := &whoami{}
	inner := server.NewStreamableHTTPServer(up, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, headersKey{}, r.Header.Clone())
	}))
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.all = append(w.all, r.Header.Clone())
		w.mu.Unlock()
		if guard != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			if !guard(rw, r, body) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		inner.ServeHTTP(rw, r)
	}))
	for path, h := range extra {
		mux.HandleFunc(path, h)
	}
	w.url = serveHTTP(t, mux) + "/mcp"
	return w
}

// seen is what the upstream's whoami tool answered the caller c.
func (w *whoami) seen(t *testing.T, c *client, tool string) map[string][]string {
	t.Helper()
	var out map[string][]string
	require.NoError(t, json.Unmarshal([]byte(resultText(t, c.callToolResult(tool, map[string]any{}))), &out))
	return out
}

// crmConfig is a config whose gateway takes the tokens issuer issues for
// gatewayAudience, in front of one server, crm, at url, with the settings
// given (each a line of YAML under the server).
func crmConfig(issuer, url string, settings ...string) string {
	return fmt.Sprintf(`version: 1
http:
  auth:
    oauth:
      issuer: %s
      audience: %s
servers:
`, issuer, gatewayAudience) + serverYAML("crm", append([]string{"url: " + url}, settings...)...)
}

// exchangeAuth is the auth of crm (crmConfig) by token exchange at the
// gateway's issuer, as the client mcp-gateway, its secret in GW_SECRET,
// for the audience https://crm.example.com; more are further settings of it.
func exchangeAuth(more ...string) []string {
	auth := []string{"auth:", "  type: token_exchange", "  client_id: mcp-gateway", "  client_secret: {env: GW_SECRET}", "  audience: https://crm.example.com"}
	for _, line := range more {
		auth = append(auth, "  "+line)
	}
	return auth
}

// TestPrincipalHeaders: a server's X-User-Id header is each caller's own
// subject, on a shared connection; a caller's claim goes in another
// header; requests no caller made carry neither.
func TestPrincipalHeaders(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	up := newWhoami(t)
	a := serveConfig(t, httpTransport, crmConfig(is.url, up.url,
		"headers:",
		"  X-User-Id: {principal: subject}",
		`  X-Email: {principal: "claim:email"}`))
	a.waitLoaded()

	aliceToken := is.mint(t, jwt.MapClaims{"sub": "alice", "client_id": "agent-a", "email": "alice@example.com"})
	bobToken := is.mint(t, jwt.MapClaims{"sub": "bob", "client_id": "agent-b", "email": nil})
	alice, bob := a.connectAs(aliceToken), a.connectAs(bobToken)
	for range 2 { // in turns, over the one connection the server has
		assert.Equal(t, map[string][]string{"X-User-Id": {"alice"}, "X-Email": {"alice@example.com"}, "Authorization": nil},
			up.seen(t, alice, "whoami"))
		assert.Equal(t, map[string][]string{"X-User-Id": {"bob"}, "X-Email": nil, "Authorization": nil},
			up.seen(t, bob, "whoami"), "a caller without the claim gets no header, never another's")
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	users := map[string]int{}
	for _, h := range up.all {
		users[h.Get("X-User-Id")]++
	}
	assert.GreaterOrEqual(t, users["alice"], 2)
	assert.GreaterOrEqual(t, users["bob"], 2)
	assert.Positive(t, users[""], "the connection's own requests (initialize, lists) name no caller")
	delete(users, "alice")
	delete(users, "bob")
	delete(users, "")
	assert.Empty(t, users, "no other value was ever sent")
	for _, tok := range []string{aliceToken, bobToken} {
		assert.NotContains(t, a.log.String(), tok, "an access token reached the log")
	}
}
