package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// startCIMDProvider runs node/cimdprovider.mjs, oidc-provider with client
// ID metadata documents on, trusting the certificates of caFile, and
// returns its issuer and its output.
func startCIMDProvider(t *testing.T, caFile string) (string, *logBuffer) {
	t.Helper()
	nodeEntry(t, "oidc-provider/package.json")
	cmd := exec.Command("node", filepath.Join(nodeDir, "cimdprovider.mjs"))
	cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+caFile)
	log, exited := startProcessGroup(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cimdprovider output:\n%s", log)
		}
	})
	line, ok := log.waitLine(func(line string) bool { return strings.HasPrefix(line, `{"issuer":`) }, startTimeout, exited)
	require.True(t, ok, "cimdprovider never said its issuer:\n%s", log)
	var hello struct {
		Issuer string `json:"issuer"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &hello))
	return hello.Issuer, log
}

// startJWTUpstream is an MCP server that takes the JWT access tokens of
// issuer issued for it (aud), checked against the issuer's published keys,
// and names issuer in its protected resource metadata.
func startJWTUpstream(t *testing.T, issuer string) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resource := srv.URL + "/mcp"
	server := mcp.NewServer(&mcp.Implementation{Name: "secured", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Says whose token the call came with."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	verifier := op.NewAccessTokenVerifier(issuer, rp.NewRemoteKeySet(&http.Client{Timeout: 10 * time.Second}, issuer+"/jwks"))
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](ctx, token, verifier)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		if !slices.Contains(claims.Audience, resource) {
			return nil, fmt.Errorf("%w: the token is for %v, not %s", auth.ErrInvalidToken, claims.Audience, resource)
		}
		return &auth.TokenInfo{UserID: claims.Subject, Expiration: claims.Expiration.AsTime(), Scopes: claims.Scopes}, nil
	}
	metadataURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL})(handler))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: resource, AuthorizationServers: []string{issuer}, ScopesSupported: []string{"mcp"},
	}))
	return resource
}

// TestOAuthClientIDMetadataDocumentOIDCProvider: the login against
// oidc-provider (npm), an authorization server that resolves client ID
// metadata documents itself. The gateway serves the document over https
// (its TLS listener, a certificate of a test CA the provider trusts); the
// provider fetches it, validates it and enforces its redirect URI; the real
// login command gets a token with the document's URL as its client_id,
// checking the provider's iss; and a tool call through the aggregator goes
// to the upstream with that token.
func TestOAuthClientIDMetadataDocumentOIDCProvider(t *testing.T) {
	t.Parallel()
	ca := newTLSCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600))
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, 2).install(t, certFile, keyFile)

	issuer, providerLog := startCIMDProvider(t, caFile)
	upURL := startJWTUpstream(t, issuer)
	home, env := loginHome(t)
	server := fmt.Sprintf("servers:\n  secured:\n    url: %s\n    auth: {type: oauth}\n    transform: [{prefix: sec_}]\n", upURL)
	cfg := writeConfig(t, "version: 1\n"+server)

	gw := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{cfg}, env: env, flags: []string{"--tls-cert", certFile, "--tls-key", keyFile}})
	gw.waitLoaded()
	base, err := url.Parse(gw.url)
	require.NoError(t, err)
	require.Equal(t, "https", base.Scheme)
	docURL := "https://" + base.Host + "/oauth/mcp-aggregator.json"
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\noauth: {client_id_url: %s}\n%s", docURL, server)), 0o644))
	client := tlsClient(ca)
	require.Eventually(t, func() bool {
		resp, err := client.Get(docURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, startTimeout, 50*time.Millisecond, "the gateway never served the document after the reload; stderr:\n%s", gw.log)

	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	require.Equal(t, 0, code, "login; stdout:\n%s\nstderr:\n%s\nprovider:\n%s", stdout, stderr, providerLog)
	authURL, err := url.Parse(strings.SplitN(stdout, "\n", 2)[0])
	require.NoError(t, err)
	assert.Equal(t, docURL, authURL.Query().Get("client_id"))
	assert.True(t, providerLog.containsLine("fetched "+docURL+" 200 public, max-age=3600"),
		"the provider fetched the document from the gateway:\n%s", providerLog)
	g := onlyGrant(t, home)
	assert.Equal(t, docURL, g.ClientID)
	assert.Equal(t, issuer, g.Issuer)

	// A call through the aggregator goes to the upstream with the token.
	a := startAggregator(t, stdioTransport, aggregatorOptions{configs: []string{cfg}, env: env})
	c := a.newClient()
	c.initialize()
	a.waitLoaded()
	assert.Equal(t, "alice", firstText(t, c.callToolResult("sec_whoami", map[string]any{})), "stderr:\n%s", a.log)
}
