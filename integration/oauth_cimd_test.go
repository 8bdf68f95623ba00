package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// cimdFetches is what the authorization server's fetches of client ID
// metadata documents saw.
type cimdFetches struct {
	mu           sync.Mutex
	urls         []string
	cacheControl []string
	docs         []map[string]any
}

// resolveByDocument makes as take client IDs that are URLs, as a server
// supporting client ID metadata documents does: it fetches the document
// over HTTP, and accepts it only as the draft says (200, JSON, bounded,
// client_id equal to the URL, redirect URIs listed, a public client),
// its redirect URIs being those the client may use. zitadel/oidc's
// provider resolves no such client itself: its storage is where a
// deployment resolves clients, and this is that resolution.
func resolveByDocument(as *authServer) *cimdFetches {
	f := &cimdFetches{}
	fetcher := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errors.New("a client ID metadata document is not fetched through a redirect")
	}}
	fetch := func(ctx context.Context, id string) (op.Client, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := fetcher.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetching the client's document: %w", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 5<<10+1))
		if err != nil || len(body) > 5<<10 {
			return nil, errors.New("the client's document is unreadable or over 5 KiB")
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("the client's document answered HTTP %d", resp.StatusCode)
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
			return nil, fmt.Errorf("the client's document is %q, not application/json", mt)
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, errors.New("the client's document is not a JSON object")
		}
		if doc["client_id"] != id {
			return nil, errors.New("the client's document names another client_id")
		}
		if _, ok := doc["client_secret"]; ok || doc["token_endpoint_auth_method"] != "none" {
			return nil, errors.New("the client's document is not that of a public client")
		}
		raw, _ := doc["redirect_uris"].([]any)
		var redirects []string
		for _, r := range raw {
			if s, ok := r.(string); ok {
				redirects = append(redirects, s)
			}
		}
		if len(redirects) == 0 {
			return nil, errors.New("the client's document lists no redirect_uris")
		}
		f.mu.Lock()
		f.urls = append(f.urls, id)
		f.cacheControl = append(f.cacheControl, resp.Header.Get("Cache-Control"))
		f.docs = append(f.docs, doc)
		f.mu.Unlock()
		return &opClient{id: id, redirects: redirects, issuer: as.issuer}, nil
	}
	as.store.mu.Lock()
	as.store.fetchClient = fetch
	as.store.mu.Unlock()
	return f
}

func (f *cimdFetches) seen() (urls, cacheControl []string, docs []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.urls...), append([]string(nil), f.cacheControl...), append([]map[string]any(nil), f.docs...)
}

// TestOAuthClientIDMetadataDocument: an authorization server that takes
// client ID metadata documents (and offers dynamic registration too) is
// logged in to with the document's URL as the client_id. The running
// gateway serves the document at that URL, read from its config (here
// after a reload that adds oauth.client_id_url); the authorization server
// fetches it from the gateway, validates it, and issues the token the
// gateway then calls the upstream with. Nothing is registered.
func TestOAuthClientIDMetadataDocument(t *testing.T) {
	t.Parallel()
	as := startAuthServer(t, true, "")
	fetches := resolveByDocument(as)
	up := startSecuredUpstream(t, as)
	home, env := loginHome(t)
	server := fmt.Sprintf(`servers:
  secured:
    url: %s
    auth: {type: oauth}
    transform: [{prefix: sec_}]
`, up.url)
	cfg := writeConfig(t, "version: 1\n"+server)

	a := startAggregator(t, httpTransport, aggregatorOptions{configs: []string{cfg}, env: env})
	a.waitLoaded()
	base, err := url.Parse(a.url)
	require.NoError(t, err)
	docURL := "http://" + base.Host + "/oauth/mcp-aggregator.json"
	// The gateway's address is known only now: the config names it in a
	// reload, which the document follows.
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\noauth:\n  client_id_url: %s\n  client_name: Team gateway\n%s", docURL, server)), 0o644))
	var served map[string]any
	require.Eventually(t, func() bool {
		resp, err := http.Get(docURL)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.Contains(t, resp.Header.Get("Cache-Control"), "max-age=")
		assert.NotEmpty(t, resp.Header.Get("ETag"))
		return json.NewDecoder(resp.Body).Decode(&served) == nil
	}, startTimeout, 50*time.Millisecond, "the gateway never served the document after the reload; stderr:\n%s", a.log)
	want := map[string]any{
		"client_id": docURL, "client_name": "Team gateway", "redirect_uris": []any{"http://127.0.0.1/callback"},
		"grant_types": []any{"authorization_code", "refresh_token"}, "response_types": []any{"code"},
		"token_endpoint_auth_method": "none", "application_type": "native", "software_id": "mcp-aggregator",
	}
	assert.Equal(t, want, served)
	for path, status := range map[string]int{"/oauth/other.json": http.StatusNotFound, "/": http.StatusNotFound, "/oauth/mcp-aggregator.json/x": http.StatusNotFound} {
		resp, err := http.Get("http://" + base.Host + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, status, resp.StatusCode, "GET %s", path)
	}
	assert.True(t, a.log.containsLine("serving the client ID metadata documents", docURL), "the log says what is served:\n%s", a.log)
	resp, err := http.Post(docURL, "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "the document is read, not written")

	// The document is what `login --client-metadata` prints for static hosting.
	printed, code := runCommand(t, env, "login", "secured", "--config", cfg, "--client-metadata")
	require.Equal(t, 0, code, "%s", printed)
	assert.JSONEq(t, string(mustJSON(t, want)), printed)

	c := a.newClient()
	c.initialize()
	listen(t, a, c)

	stdout, stderr, code := runLogin(t, env, "secured", "--config", cfg, "--no-browser")
	require.Equal(t, 0, code, "login; stdout:\n%s\nstderr:\n%s\naggregator:\n%s", stdout, stderr, a.log)
	authURL, err := url.Parse(strings.SplitN(stdout, "\n", 2)[0])
	require.NoError(t, err)
	assert.Equal(t, docURL, authURL.Query().Get("client_id"), "the document's URL is the client_id")
	assert.Empty(t, as.store.notesOf("register"), "nothing registered: the server takes the document")
	urls, cacheControl, docs := fetches.seen()
	require.NotEmpty(t, urls, "the authorization server fetched the document")
	for i, u := range urls {
		assert.Equal(t, docURL, u)
		assert.Equal(t, want, docs[i])
		assert.Contains(t, cacheControl[i], "max-age=")
	}
	g := onlyGrant(t, home)
	assert.Equal(t, docURL, g.ClientID)

	// The running gateway takes the login up and calls the upstream with
	// the token the authorization server issued to the document's client.
	_, ok := c.waitNotification(func(n notification) bool { return n.Method == "notifications/tools/list_changed" }, startTimeout)
	require.True(t, ok, "no tools/list_changed after the login; stderr:\n%s", a.log)
	assert.Equal(t, oauthSubject, firstText(t, c.callToolResult("sec_whoami", map[string]any{})))
	assert.Equal(t, g.AccessToken, up.lastToken())
}
