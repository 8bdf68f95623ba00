package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bearer adds a client's token to every request of an HTTP client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// newClientAs returns an uninitialized HTTP client of the aggregator that
// presents token on every request (its initialize, its GET stream, its
// DELETE).
func (a *aggregator) newClientAs(token string) *client {
	a.t.Helper()
	box := newInbox()
	w := newHTTPWire(a.url, box)
	w.hc.Transport = bearer{token: token, base: w.hc.Transport}
	c := &client{t: a.t, wire: w, inbox: box}
	a.t.Cleanup(func() { assert.NoError(a.t, c.wire.close(), "closing the HTTP session") })
	return c
}

// connectAs returns an initialized client presenting token.
func (a *aggregator) connectAs(token string) *client {
	a.t.Helper()
	c := a.newClientAs(token)
	c.initialize()
	return c
}

// rawPost sends one JSON-RPC message to url with the given headers and
// returns the response, its body read.
func rawPost(t *testing.T, url string, msg map[string]any, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	body, err := json.Marshal(msg)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

func initializeMsg() map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "auth-test", "version": "1"}}}
}

// headerRecorder is a remote MCP upstream (mcp-go over streamable HTTP)
// that remembers every Authorization header it was sent.
type headerRecorder struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func newHeaderRecorder(t *testing.T) *headerRecorder {
	t.Helper()
	up := server.NewMCPServer("recorder", "1.0.0", server.WithToolCapabilities(true))
	addTextTool(up, "hello", "Says hello.", "hello")
	rec := &headerRecorder{}
	inner := server.NewStreamableHTTPServer(up)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.Header.Values("Authorization")...)
		rec.mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	rec.url = serveHTTP(t, mux) + "/mcp"
	return rec
}

func (r *headerRecorder) headers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// Tokens of the static-token tests: long random values, as an operator
// would generate them.
func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestAuthStaticTokens: with http.auth.tokens, /mcp needs one of the
// tokens; the token's key names the client; a session answers only its
// own client; no token reaches the log or an upstream.
func TestAuthStaticTokens(t *testing.T) {
	t.Parallel()
	ciToken, laptopToken := randomToken(t), randomToken(t)
	rec := newHeaderRecorder(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf(`version: 1
http:
  auth:
    tokens:
      ci-bot: { env: CI_BOT_TOKEN }
      laptop: { env: LAPTOP_TOKEN }
servers:
  demo:
    truely-stateless: true
    %s
    transform: [{prefix: demo_}]
  remote:
    truely-stateless: true
    url: %s
    transform: [{prefix: remote_}]
`, demoServer("tools"), rec.url))},
		env: []string{"CI_BOT_TOKEN=" + ciToken, "LAPTOP_TOKEN=" + laptopToken},
	})
	a.waitLoaded()

	t.Run("no token", func(t *testing.T) {
		resp, body := rawPost(t, a.url, initializeMsg(), nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
		assert.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"))
		assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
	})
	t.Run("wrong token", func(t *testing.T) {
		resp, body := rawPost(t, a.url, initializeMsg(), map[string]string{"Authorization": "Bearer " + ciToken + "x"})
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
		assert.Equal(t, `Bearer error="invalid_token", error_description="the bearer token is not valid"`, resp.Header.Get("WWW-Authenticate"))
	})
	t.Run("token in the query is not a token", func(t *testing.T) {
		resp, _ := rawPost(t, a.url+"?access_token="+ciToken, initializeMsg(), nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
	t.Run("no protected resource metadata without oauth", func(t *testing.T) {
		resp, err := http.Get(strings.TrimSuffix(a.url, "/mcp") + "/.well-known/oauth-protected-resource")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	})

	ci := a.connectAs(ciToken)
	names := toolNames(t, ci.listTools())
	assert.Contains(t, names, "demo_echo")
	assert.Contains(t, names, "remote_hello")
	assert.Equal(t, "hello", firstText(t, ci.callToolResult("remote_hello", map[string]any{})))
	for _, h := range rec.headers() {
		assert.NotContains(t, h, ciToken, "the client's token reached an upstream")
		assert.NotContains(t, h, laptopToken, "a client's token reached an upstream")
	}

	t.Run("a session answers its own client only", func(t *testing.T) {
		session := ci.wire.(*httpWire).session
		list := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
		resp, body := rawPost(t, a.url, list, map[string]string{"Authorization": "Bearer " + laptopToken,
			"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "another client's token must not drive the session: %s", body)
		resp, body = rawPost(t, a.url, list, map[string]string{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
		resp, body = rawPost(t, a.url, list, map[string]string{"Authorization": "Bearer " + ciToken,
			"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	})

	laptop := a.connectAs(laptopToken)
	assert.Equal(t, names, toolNames(t, laptop.listTools()))

	log := a.log.String()
	assert.NotContains(t, log, ciToken, "a token reached the log")
	assert.NotContains(t, log, laptopToken, "a token reached the log")
}

// issuer is an OAuth authorization server for the tests: RFC 8414 metadata
// and a JWK Set with one RSA key, which mints the access tokens.
type issuer struct {
	url       string
	key       *rsa.PrivateKey
	jwksCalls atomic.Int64
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	is := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.url, "jwks_uri": is.url + "/jwks",
			"authorization_endpoint": is.url + "/authorize", "token_endpoint": is.url + "/token"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.jwksCalls.Add(1)
		pub := &is.key.PublicKey
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "key-1", "use": "sig", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
		}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

// mint signs an access token; claims override the good defaults (nil
// removes one).
func (is *issuer) mint(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"iss": is.url, "aud": gatewayAudience, "sub": "person-1", "client_id": "agent-7",
		"scope": "openid mcp", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = "key-1"
	s, err := tok.SignedString(is.key)
	require.NoError(t, err)
	return s
}

const gatewayAudience = "https://gateway.example.com/mcp"

// TestAuthOAuth: the gateway as an OAuth 2.1 resource server, with an
// issuer and tokens made in the test.
func TestAuthOAuth(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	a := serveConfig(t, httpTransport, fmt.Sprintf(`version: 1
http:
  auth:
    oauth:
      issuer: %s
      audience: %s
      required_scopes: [mcp]
servers:
  demo:
    truely-stateless: true
    %s
    transform: [{prefix: demo_}]
`, is.url, gatewayAudience, demoServer("tools")))
	a.waitLoaded()
	base := strings.TrimSuffix(a.url, "/mcp")
	metadataURL := "https://gateway.example.com/.well-known/oauth-protected-resource"

	t.Run("metadata document", func(t *testing.T) {
		for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
			"/.well-known/oauth-protected-resource/mcp/readonly"} {
			resp, err := http.Get(base + path)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.JSONEq(t, fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],"scopes_supported":["mcp"],
				"bearer_methods_supported":["header"],"resource_name":"mcp-aggregator"}`, gatewayAudience, is.url), string(body), path)
		}
	})
	t.Run("no token", func(t *testing.T) {
		resp, body := rawPost(t, a.url, initializeMsg(), nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
		assert.Equal(t, `Bearer resource_metadata="`+metadataURL+`", scope="mcp"`, resp.Header.Get("WWW-Authenticate"))
	})
	t.Run("a view's metadata", func(t *testing.T) {
		resp, body := rawPost(t, a.url+"/readonly", initializeMsg(), nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
		assert.Equal(t, `Bearer resource_metadata="`+metadataURL+`/mcp/readonly", scope="mcp"`, resp.Header.Get("WWW-Authenticate"),
			"a view's challenge names the view's document")
		resp, err := http.Get(base + "/.well-known/oauth-protected-resource/mcp/a/b")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "no view has that name")
	})
	refusals := []struct {
		name      string
		claims    jwt.MapClaims
		status    int
		challenge string
	}{
		{"wrong audience", jwt.MapClaims{"aud": "https://other.example.com/mcp"}, 401,
			`Bearer resource_metadata="` + metadataURL + `", error="invalid_token", error_description="the token is not meant for this resource (aud)", scope="mcp"`},
		{"expired", jwt.MapClaims{"exp": time.Now().Add(-10 * time.Minute).Unix()}, 401,
			`Bearer resource_metadata="` + metadataURL + `", error="invalid_token", error_description="the token has expired", scope="mcp"`},
		{"wrong issuer", jwt.MapClaims{"iss": "https://evil.example.com"}, 401,
			`Bearer resource_metadata="` + metadataURL + `", error="invalid_token", error_description="the token is from another issuer (iss)", scope="mcp"`},
		{"insufficient scope", jwt.MapClaims{"scope": "openid"}, 403,
			`Bearer resource_metadata="` + metadataURL + `", error="insufficient_scope", error_description="the token lacks the scope mcp", scope="mcp"`},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			token := is.mint(t, tc.claims)
			resp, body := rawPost(t, a.url, initializeMsg(), map[string]string{"Authorization": "Bearer " + token})
			assert.Equal(t, tc.status, resp.StatusCode, "%s", body)
			assert.Equal(t, tc.challenge, resp.Header.Get("WWW-Authenticate"))
			assert.Empty(t, resp.Header.Get("Mcp-Session-Id"))
		})
	}

	token := is.mint(t, nil)
	c := a.connectAs(token)
	assert.Contains(t, toolNames(t, c.listTools()), "demo_echo")
	assert.Equal(t, int64(1), is.jwksCalls.Load(), "the keys are fetched once and kept")
	assert.NotContains(t, a.log.String(), token, "an access token reached the log")
}

// TestAuthForeignBind: a non-loopback bind without http.auth refuses to
// start unless --allow-unauthenticated says so; with http.auth it starts.
func TestAuthForeignBind(t *testing.T) {
	t.Parallel()
	open := writeConfig(t, fmt.Sprintf("version: 1\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))

	t.Run("refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "serve", "--config", open, "--http", "0.0.0.0:0")
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "serve must exit non-zero; output:\n%s", out)
		assert.NotZero(t, exit.ExitCode())
		assert.Contains(t, string(out), "http.auth")
		assert.Contains(t, string(out), "--allow-unauthenticated")
		assert.NotContains(t, string(out), "msg=listening", "it never listened")
	})
	t.Run("allowed with --allow-unauthenticated", func(t *testing.T) {
		a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{open},
			flags: []string{"--http", "0.0.0.0:0", "--allow-unauthenticated"}})
		assert.Contains(t, a.log.String(), "level=WARN msg=\"serving on a non-loopback address without http.auth")
		a.url = loopbackURL(a.url)
		a.waitLoaded()
		assert.Contains(t, toolNames(t, a.connect().listTools()), "echo")
	})
	t.Run("allowed with http.auth", func(t *testing.T) {
		token := randomToken(t)
		a := startAggregator(t, httpTransport, aggregatorOptions{
			configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nhttp: {auth: {tokens: {ops: {env: OPS_TOKEN}}}}\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))},
			flags:   []string{"--http", "0.0.0.0:0"}, env: []string{"OPS_TOKEN=" + token}})
		a.url = loopbackURL(a.url)
		a.waitLoaded()
		resp, _ := rawPost(t, a.url, initializeMsg(), nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Contains(t, toolNames(t, a.connectAs(token).listTools()), "echo")
	})
}

// loopbackURL points a URL printed for a wildcard bind at loopback.
func loopbackURL(u string) string {
	return strings.NewReplacer("//0.0.0.0:", "//127.0.0.1:", "//[::]:", "//127.0.0.1:").Replace(u)
}

// TestAuthReload: an edit of http.auth applies without a restart: a
// client's token is replaced, another client is added.
func TestAuthReload(t *testing.T) {
	t.Parallel()
	first, second, ops := randomToken(t), randomToken(t), randomToken(t)
	config := func(tokens string) string {
		return fmt.Sprintf("version: 1\nhttp: {auth: {tokens: {%s}}}\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", tokens, demoServer("tools"))
	}
	path := writeConfig(t, config("ci-bot: {env: FIRST}"))
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path},
		env: []string{"FIRST=" + first, "SECOND=" + second, "OPS=" + ops}})
	a.waitLoaded()
	status := func(token string) int {
		resp, body := rawPost(t, a.url, initializeMsg(), map[string]string{"Authorization": "Bearer " + token})
		if resp.StatusCode == http.StatusOK {
			// Close the session it opened.
			req, _ := http.NewRequest(http.MethodDelete, a.url, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"))
			if r, err := http.DefaultClient.Do(req); err == nil {
				r.Body.Close()
			}
		}
		_ = body
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, status(first))
	assert.Equal(t, http.StatusUnauthorized, status(second))

	r := &reloadRig{t: t, a: a, path: path}
	r.save(config("ci-bot: {env: SECOND}, ops: {env: OPS}"))
	r.waitReload()
	assert.Equal(t, http.StatusUnauthorized, status(first), "the replaced token no longer works")
	assert.Equal(t, http.StatusOK, status(second))
	assert.Equal(t, http.StatusOK, status(ops), "the added client works")

	r.save(config("ci-bot: {env: UNSET_VARIABLE}"))
	r.waitReload()
	assert.Equal(t, http.StatusOK, status(second), "a config with errors changes nothing")
	for _, tok := range []string{first, second, ops} {
		assert.NotContains(t, a.log.String(), tok)
	}
}

// TestAuthReloadKeepsAuthOnForeignBind: a reload that drops http.auth from a
// gateway on a non-loopback address is not followed.
func TestAuthReloadKeepsAuthOnForeignBind(t *testing.T) {
	t.Parallel()
	token := randomToken(t)
	server := fmt.Sprintf("servers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools"))
	path := writeConfig(t, "version: 1\nhttp: {auth: {tokens: {ops: {env: OPS_TOKEN}}}}\n"+server)
	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{path},
		flags: []string{"--http", "0.0.0.0:0"}, env: []string{"OPS_TOKEN=" + token}})
	a.url = loopbackURL(a.url)
	a.waitLoaded()

	r := &reloadRig{t: t, a: a, path: path}
	r.save("version: 1\n" + server)
	r.waitReload()
	assert.Contains(t, a.log.String(), `level=ERROR msg="the config no longer sets http.auth, but the gateway listens on a non-loopback address; keeping the previous authentication"`)
	resp, _ := rawPost(t, a.url, initializeMsg(), nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the gateway stays protected")
	assert.Contains(t, toolNames(t, a.connectAs(token).listTools()), "echo")
}
