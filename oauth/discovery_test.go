package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

func TestMetadataCandidates(t *testing.T) {
	cs := parseChallenges([]string{`Bearer resource_metadata="https://mcp.example/meta"`})
	assert.Equal(t, [][2]string{
		{"https://mcp.example/meta", "https://mcp.example/v1/mcp"},
		{"https://mcp.example/.well-known/oauth-protected-resource/v1/mcp", "https://mcp.example/v1/mcp"},
		{"https://mcp.example/.well-known/oauth-protected-resource", "https://mcp.example"},
	}, metadataCandidates("https://KEY@MCP.example/v1/mcp?api_key=secret", cs), "no credentials of the URL in any candidate")
}

func TestServerMetadataURLs(t *testing.T) {
	assert.Equal(t, []string{"https://as.example/.well-known/oauth-authorization-server", "https://as.example/.well-known/openid-configuration"},
		serverMetadataURLs("https://as.example/"))
	assert.Equal(t, []string{
		"https://as.example/.well-known/oauth-authorization-server/tenant/1",
		"https://as.example/.well-known/openid-configuration/tenant/1",
		"https://as.example/tenant/1/.well-known/openid-configuration",
	}, serverMetadataURLs("https://as.example/tenant/1"))
}

func TestEndpointURL(t *testing.T) {
	for _, ok := range []string{"https://as.example/token", "http://127.0.0.1:8080/token", "http://localhost/x", "http://[::1]:9/x", "https://8.8.8.8/x"} {
		assert.NoError(t, endpointURL(ok), ok)
	}
	for _, bad := range []string{"http://as.example/token", "javascript:alert(1)", "https:///nohost", "https://10.1.2.3/token",
		"https://169.254.169.254/latest", "https://[fd00::1]/x", "https://100.64.0.1/x", "https://0.0.0.0/x", "file:///etc/passwd"} {
		assert.Error(t, endpointURL(bad), bad)
	}
}

// metadataServer serves documents at paths; every other path is a 404.
func metadataServer(t *testing.T, docs map[string]any) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if s, ok := doc.(string); ok {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(s))
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestGetServerMetadata(t *testing.T) {
	ctx := context.Background()
	client := &http.Client{Timeout: 5 * time.Second}
	docs := map[string]any{}
	srv := metadataServer(t, docs)
	issuer := srv.URL + "/tenant"
	good := map[string]any{"issuer": issuer, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
		"revocation_endpoint": srv.URL + "/revoke", "code_challenge_methods_supported": []string{"plain", "S256"}}
	// Only the last of the three places has it: OpenID Connect appended.
	docs["/tenant/.well-known/openid-configuration"] = good
	m, err := getServerMetadata(ctx, client, issuer)
	require.NoError(t, err)
	require.NotNil(t, m)
	assert.Equal(t, srv.URL+"/revoke", m.RevocationEndpoint)

	for _, tc := range []struct {
		name, wantErr string
		change        func(map[string]any)
	}{
		{"another issuer", "names the issuer", func(d map[string]any) { d["issuer"] = "https://attacker.example" }},
		{"no S256", "PKCE", func(d map[string]any) { d["code_challenge_methods_supported"] = []string{"plain"} }},
		{"no PKCE", "PKCE", func(d map[string]any) { delete(d, "code_challenge_methods_supported") }},
		{"a token endpoint in clear", "token_endpoint", func(d map[string]any) { d["token_endpoint"] = "http://as.example/token" }},
		{"a script as endpoint", "authorization_endpoint", func(d map[string]any) { d["authorization_endpoint"] = "javascript:alert(1)" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := map[string]any{}
			for k, v := range good {
				d[k] = v
			}
			tc.change(d)
			docs["/.well-known/oauth-authorization-server/tenant"] = d
			defer delete(docs, "/.well-known/oauth-authorization-server/tenant")
			_, err := getServerMetadata(ctx, client, issuer)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}

	docs["/.well-known/oauth-authorization-server/tenant"] = "<html>login</html>"
	_, err = getServerMetadata(ctx, client, issuer)
	require.Error(t, err, "a document that is not JSON")
	assert.Contains(t, err.Error(), "not application/json")

	docs["/.well-known/oauth-authorization-server/tenant"] = map[string]any{"issuer": issuer, "pad": strings.Repeat("x", maxMetadata)}
	_, err = getServerMetadata(ctx, client, issuer)
	require.Error(t, err, "a document over the bound")
	assert.Contains(t, err.Error(), "bytes")

	m, err = getServerMetadata(ctx, client, srv.URL+"/none")
	assert.NoError(t, err)
	assert.Nil(t, m, "no metadata anywhere")
}

func TestGetResourceMetadata(t *testing.T) {
	ctx := context.Background()
	client := &http.Client{Timeout: 5 * time.Second}
	docs := map[string]any{}
	srv := metadataServer(t, docs)
	docs["/ok"] = map[string]any{"resource": "https://mcp.example/mcp", "authorization_servers": []string{"https://as.example"}, "scopes_supported": []string{"a"}}
	docs["/other"] = map[string]any{"resource": "https://other.example/mcp", "authorization_servers": []string{"https://as.example"}}
	docs["/none"] = map[string]any{"resource": "https://mcp.example/mcp"}
	docs["/internal"] = map[string]any{"resource": "https://mcp.example/mcp", "authorization_servers": []string{"https://169.254.169.254/"}}
	m, err := getResourceMetadata(ctx, client, srv.URL+"/ok", "https://mcp.example/mcp")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, m.ScopesSupported)
	for path, want := range map[string]string{"/other": "another resource", "/none": "no authorization server", "/internal": "non-public", "/missing": "404"} {
		_, err := getResourceMetadata(ctx, client, srv.URL+path, "https://mcp.example/mcp")
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), want, path)
	}
}

// TestDiscoveryRefusesNonPublicAddresses: a metadata URL whose name
// resolves to a private address is not fetched; the check is at the
// dial, so a name cannot hide the address.
func TestDiscoveryRefusesNonPublicAddresses(t *testing.T) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	c := discoveryClient(client)
	tr := c.Transport.(*http.Transport)
	require.NotNil(t, tr.DialContext, "the dial is guarded")
	_, err := tr.DialContext(context.Background(), "tcp", "10.0.0.1:443")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "non-public")
	custom := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, http.ErrHandlerTimeout })}
	assert.NotNil(t, discoveryClient(custom).Transport, "a transport of the caller's own is kept")
}

func TestRegisterClient(t *testing.T) {
	var mu sync.Mutex
	var got map[string]any
	answer := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = nil
		_ = json.NewDecoder(r.Body).Decode(&got)
		answer(w, http.StatusCreated, `{"client_id":"c-1","client_secret":"s3cret-0123456789","token_endpoint_auth_method":"client_secret_post"}`)
	})
	mux.HandleFunc("/refuse", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusBadRequest, `{"error":"invalid_redirect_uri","error_description":"s3cret-0123456789"}`)
	})
	mux.HandleFunc("/leaky", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusCreated, `{"client_secret":"s3cret-0123456789"}`)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusCreated, `{"client_id":"`+strings.Repeat("x", maxRegistration)+`"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	client := &http.Client{Timeout: 5 * time.Second}

	r, err := registerClient(ctx, client, srv.URL+"/register", "http://127.0.0.1:5000/callback", "gateway")
	require.NoError(t, err)
	assert.Equal(t, registration{ClientID: "c-1", ClientSecret: "s3cret-0123456789", TokenEndpointAuthMethod: "client_secret_post"}, *r)
	mu.Lock()
	assert.Equal(t, map[string]any{"redirect_uris": []any{"http://127.0.0.1:5000/callback"}, "client_name": "gateway",
		"grant_types": []any{"authorization_code", "refresh_token"}, "response_types": []any{"code"},
		"token_endpoint_auth_method": "none", "application_type": "native"}, got)
	mu.Unlock()

	for path, want := range map[string]string{"/refuse": "invalid_redirect_uri", "/leaky": "no client_id", "/huge": "bytes"} {
		_, err := registerClient(ctx, client, srv.URL+path, "http://127.0.0.1:5000/callback", "gateway")
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), want, path)
		assert.NotContains(t, err.Error(), "s3cret", path)
	}
}

func TestRegistrationAuthStyle(t *testing.T) {
	for _, tc := range []struct {
		method, secret string
		want           string
	}{
		{"none", "", "params"}, {"", "", "params"}, {"client_secret_post", "s", "params"},
		{"client_secret_basic", "s", "header"}, {"", "s", "header"}, {"private_key_jwt", "s", "header"},
	} {
		r := registration{TokenEndpointAuthMethod: tc.method, ClientSecret: tc.secret}
		got := map[bool]string{true: "params", false: "header"}[r.authStyle() == oauth2.AuthStyleInParams]
		assert.Equal(t, tc.want, got, "%+v", tc)
	}
}

func TestCheckIss(t *testing.T) {
	meta := &serverMetadata{Issuer: "https://as.example"}
	assert.NoError(t, checkIss("", meta), "an issuer that does not say it sends iss")
	assert.NoError(t, checkIss("https://as.example", meta))
	assert.ErrorContains(t, checkIss("https://attacker.example", meta), "not \"https://as.example\"")
	meta.IssParameterSupported = true
	assert.ErrorContains(t, checkIss("", meta), "named no issuer")
	assert.NoError(t, checkIss("https://as.example", meta))
}

// TestLoginFlow: a login against an authorization server that registers
// clients: the client is registered with the loopback redirect, the
// authorization request carries PKCE S256, the resource and the scopes
// the server asks for, the code exchange the verifier and the resource,
// and the grant records the issuer and its revocation endpoint.
func TestLoginFlow(t *testing.T) {
	var mu sync.Mutex
	var authQuery, tokenForm url.Values
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/prm", scope="tools:call"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/prm", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{srv.URL + "/as"}, "scopes_supported": []string{"other"}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server/as", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"issuer": srv.URL + "/as", "authorization_endpoint": srv.URL + "/as/authorize", "token_endpoint": srv.URL + "/as/token",
			"registration_endpoint": srv.URL + "/as/register", "revocation_endpoint": srv.URL + "/as/revoke", "scopes_supported": []string{"tools:call", "offline_access"},
			"code_challenge_methods_supported": []string{"S256"}, "authorization_response_iss_parameter_supported": true})
	})
	mux.HandleFunc("/as/register", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": "dyn-1", "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("/as/authorize", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		authQuery = r.URL.Query()
		mu.Unlock()
		q := url.Values{"code": {"code-1"}, "state": {r.URL.Query().Get("state")}, "iss": {srv.URL + "/as"}}
		http.Redirect(w, r, r.URL.Query().Get("redirect_uri")+"?"+q.Encode(), http.StatusFound)
	})
	mux.HandleFunc("/as/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		tokenForm = r.PostForm
		mu.Unlock()
		writeJSON(w, 200, map[string]any{"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1", "expires_in": 3600, "scope": "tools:call offline_access"})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := Login(ctx, LoginOptions{
		Server: &config.Server{ID: "remote", URL: srv.URL + "/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth}},
		Authorize: func(u string) {
			go func() {
				if resp, err := http.Get(u); err == nil {
					resp.Body.Close()
				}
			}()
		},
		Timeout: 5 * time.Second,
	})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "dyn-1", authQuery.Get("client_id"))
	assert.Equal(t, "S256", authQuery.Get("code_challenge_method"))
	assert.Equal(t, srv.URL+"/mcp", authQuery.Get("resource"))
	assert.Equal(t, "tools:call offline_access", authQuery.Get("scope"), "the 401's scope before the metadata's, and a refresh token asked for")
	sum := sha256.Sum256([]byte(tokenForm.Get("code_verifier")))
	assert.Equal(t, authQuery.Get("code_challenge"), base64.RawURLEncoding.EncodeToString(sum[:]), "the verifier matches the challenge")
	assert.Equal(t, "code-1", tokenForm.Get("code"))
	assert.Equal(t, srv.URL+"/mcp", tokenForm.Get("resource"))
	assert.Equal(t, "dyn-1", tokenForm.Get("client_id"))
	assert.Equal(t, &Grant{Server: srv.URL + "/mcp", Resource: srv.URL + "/mcp", Issuer: srv.URL + "/as", TokenURL: srv.URL + "/as/token",
		RevocationURL: srv.URL + "/as/revoke", ClientID: "dyn-1", AuthStyle: AuthNone, AccessToken: "at-1", TokenType: "Bearer", RefreshToken: "rt-1",
		Scopes: []string{"tools:call", "offline_access"}, Expiry: g.Expiry, Obtained: g.Obtained}, g)
	assert.WithinDuration(t, time.Now().Add(time.Hour), g.Expiry, time.Minute)
}
