package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

const testClientIDURL = "https://gateway.example.com/oauth/client.json"

// TestClientConfigOrder: a pre-registered client comes first, then the
// client ID metadata document where the authorization server takes one,
// then dynamic registration; with none, the error names what to set.
func TestClientConfigOrder(t *testing.T) {
	var registered atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		registered.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"client_id":"registered-1","token_endpoint_auth_method":"none"}`))
	}))
	t.Cleanup(reg.Close)
	tests := []struct {
		name         string
		auth         config.ServerAuth
		cimd         bool
		dcr          bool
		wantClient   string
		wantErr      string
		wantRegister bool
	}{
		{name: "pre-registered first", auth: config.ServerAuth{ClientID: "pre", ClientIDURL: testClientIDURL}, cimd: true, dcr: true, wantClient: "pre"},
		{name: "document before registration", auth: config.ServerAuth{ClientIDURL: testClientIDURL}, cimd: true, dcr: true, wantClient: testClientIDURL},
		{name: "document only", auth: config.ServerAuth{ClientIDURL: testClientIDURL}, cimd: true, wantClient: testClientIDURL},
		{name: "server takes no document", auth: config.ServerAuth{ClientIDURL: testClientIDURL}, dcr: true, wantClient: "registered-1", wantRegister: true},
		{name: "no document configured", cimd: true, dcr: true, wantClient: "registered-1", wantRegister: true},
		{name: "document wanted, none configured", cimd: true, wantErr: "set oauth.client_id_url"},
		{name: "nothing offered", auth: config.ServerAuth{ClientIDURL: testClientIDURL}, wantErr: "set auth.client_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			registered.Store(0)
			auth := tt.auth
			auth.Type = config.ServerAuthOAuth
			srv := &config.Server{ID: "s", URL: "https://mcp.example.com/mcp", Auth: auth}
			meta := &serverMetadata{Issuer: "https://as.example.com", AuthorizationEndpoint: "https://as.example.com/authorize",
				TokenEndpoint: "https://as.example.com/token", ClientIDMetadataDocumentSupported: tt.cimd}
			if tt.dcr {
				meta.RegistrationEndpoint = reg.URL
			}
			cfg, err := clientConfig(context.Background(), &http.Client{Timeout: 5 * time.Second}, LoginOptions{Server: srv},
				&loginTarget{resource: srv.URL, meta: meta}, "http://127.0.0.1:1234/callback")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantClient, cfg.ClientID)
			assert.Equal(t, tt.wantRegister, registered.Load() == 1)
			if cfg.ClientID == testClientIDURL {
				assert.Empty(t, cfg.ClientSecret)
				assert.Equal(t, oauth2.AuthStyleInParams, cfg.Endpoint.AuthStyle, "a public client names itself in the token request")
			}
		})
	}
}

func TestClientMetadataDocument(t *testing.T) {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(ClientMetadata(testClientIDURL, ""), &doc))
	assert.Equal(t, map[string]any{
		"client_id": testClientIDURL, "client_name": "mcp-aggregator", "redirect_uris": []any{"http://127.0.0.1/callback"},
		"grant_types": []any{"authorization_code", "refresh_token"}, "response_types": []any{"code"},
		"token_endpoint_auth_method": "none", "application_type": "native", "software_id": "mcp-aggregator",
	}, doc)
}

// TestClientDocumentsServe: each document at its URL's path, JSON with
// caching headers and an ETag, GET and HEAD only, and nothing once a
// reload drops it.
func TestClientDocumentsServe(t *testing.T) {
	d := &ClientDocuments{}
	d.Set(map[string]string{testClientIDURL: "Team", "https://other.example.com/oauth/client.json": "", "not a url": ""})
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)

	get := func(method, path string, header http.Header) *http.Response {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		req.Host = "gateway.example.com"
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := get(http.MethodGet, "/oauth/client.json", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, "public, max-age=3600", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	var doc map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	assert.Equal(t, testClientIDURL, doc["client_id"], "the document of the URL the request's host names")
	assert.Equal(t, "Team", doc["client_name"])

	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	assert.Equal(t, http.StatusNotModified, get(http.MethodGet, "/oauth/client.json", http.Header{"If-None-Match": {etag}}).StatusCode)
	head := get(http.MethodHead, "/oauth/client.json", nil)
	assert.Equal(t, http.StatusOK, head.StatusCode)
	post := get(http.MethodPost, "/oauth/client.json", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, post.StatusCode)
	assert.Equal(t, http.StatusNotFound, get(http.MethodGet, "/oauth/other.json", nil).StatusCode)

	d.Set(nil)
	assert.Equal(t, http.StatusNotFound, get(http.MethodGet, "/oauth/client.json", nil).StatusCode, "a reload that drops the URL")
}

// TestAuthorizeChecksIssBeforeError: an error answer that names another
// issuer is refused for that, its error neither acted on nor repeated
// (RFC 9207 §2.4); one without iss from a server that says it sends iss
// is refused too.
func TestAuthorizeChecksIssBeforeError(t *testing.T) {
	tests := []struct {
		name, iss  string
		issSupport bool
		want       string
	}{
		{name: "another issuer", iss: "https://evil.example.com", want: `from the issuer "https://evil.example.com"`},
		{name: "missing iss", issSupport: true, want: "named no issuer"},
		{name: "own issuer", iss: "https://as.example.com", want: "answered access_denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb, err := listenCallback()
			require.NoError(t, err)
			t.Cleanup(cb.close)
			meta := &serverMetadata{Issuer: "https://as.example.com", IssParameterSupported: tt.issSupport}
			cfg := &oauth2.Config{ClientID: "c", RedirectURL: cb.redirectURI(), Endpoint: oauth2.Endpoint{AuthURL: "https://as.example.com/authorize"}}
			opts := LoginOptions{Server: &config.Server{ID: "s"}, Authorize: func(authURL string) {
				u, _ := url.Parse(authURL)
				q := url.Values{"state": {u.Query().Get("state")}, "error": {"access_denied"}}
				if tt.iss != "" {
					q.Set("iss", tt.iss)
				}
				go func() {
					resp, err := http.Get(cb.redirectURI() + "?" + q.Encode())
					if err == nil {
						resp.Body.Close()
					}
				}()
			}}
			_, _, err = authorize(context.Background(), opts, 10*time.Second, cb, cfg, &loginTarget{resource: "https://mcp.example.com/mcp", meta: meta})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			if tt.iss != "https://as.example.com" {
				assert.False(t, strings.Contains(err.Error(), "access_denied"), "the error of an answer from an unchecked issuer is not repeated: %v", err)
			}
		})
	}
}

// TestAuthorizeTimeoutNamesTheDocument: a login with the document that
// never comes back (the authorization server showed the user its problem
// with the client) says which URL must serve the document.
func TestAuthorizeTimeoutNamesTheDocument(t *testing.T) {
	cb, err := listenCallback()
	require.NoError(t, err)
	t.Cleanup(cb.close)
	srv := &config.Server{ID: "s", Auth: config.ServerAuth{Type: config.ServerAuthOAuth, ClientIDURL: testClientIDURL}}
	cfg := &oauth2.Config{ClientID: testClientIDURL, RedirectURL: cb.redirectURI(), Endpoint: oauth2.Endpoint{AuthURL: "https://as.example.com/authorize"}}
	_, _, err = authorize(context.Background(), LoginOptions{Server: srv}, time.Millisecond, cb, cfg,
		&loginTarget{resource: "https://mcp.example.com/mcp", meta: &serverMetadata{Issuer: "https://as.example.com"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timed out")
	assert.Contains(t, err.Error(), testClientIDURL+" serves the client ID metadata document")
}

// TestClientDocumentsSetReportsChanges: Set says when what is served
// changes, so that serve logs the documents once per change.
func TestClientDocumentsSetReportsChanges(t *testing.T) {
	d := &ClientDocuments{}
	assert.False(t, d.Set(nil), "none before, none now")
	assert.True(t, d.Set(map[string]string{testClientIDURL: ""}))
	assert.False(t, d.Set(map[string]string{testClientIDURL: ""}), "a reload that leaves it alone")
	assert.True(t, d.Set(map[string]string{testClientIDURL: "Team"}), "another client_name")
	assert.True(t, d.Set(map[string]string{"https://gateway.example.com/oauth/other.json": "Team"}), "another URL")
	assert.True(t, d.Set(nil))
}
