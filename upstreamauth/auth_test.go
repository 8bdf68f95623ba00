package upstreamauth

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
)

// newAuth builds an Auth whose keyring and vault live in a directory of
// the test's own.
func newAuth(t *testing.T, shared bool) *Auth {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	return New(context.Background(), Options{Secrets: &redact.Set{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SharedOffers: shared})
}

func oauthServer(id string, perUser bool) *config.Server {
	return &config.Server{ID: id, URL: "https://" + id + ".example.com/mcp", Auth: config.ServerAuth{Type: config.ServerAuthOAuth, PerUser: perUser}}
}

// A server's token exchanger is kept while its auth and url stay as they
// were (its cached tokens with it), and made anew when either changes.
func TestExchangerKeptWhileAuthUnchanged(t *testing.T) {
	a := newAuth(t, false)
	srv := &config.Server{ID: "x", URL: "https://x.example.com/mcp", Auth: config.ServerAuth{Type: config.ServerAuthTokenExchange,
		TokenEndpoint: "https://idp.example.com/token", ClientID: "gw", Scopes: []string{"read"}}}
	first := a.exchanger(srv)
	same := *srv
	assert.Same(t, first, a.exchanger(&same), "an unchanged server keeps its exchanger")

	scoped := *srv
	scoped.Auth.Scopes = []string{"read", "write"}
	assert.NotSame(t, first, a.exchanger(&scoped), "other scopes: another exchanger")
	moved := *srv
	moved.URL = "https://y.example.com/mcp"
	assert.NotSame(t, a.exchanger(&scoped), a.exchanger(&moved), "another url: another exchanger")

	rt, err := a.Authorize(srv, http.DefaultTransport)
	require.NoError(t, err)
	assert.NotNil(t, rt)
}

// A per-user server cannot be authorized until http.auth.user_logins sets
// the vault up; a key that does not parse leaves it so, and the reason is
// the operator's to read in the log, never the key.
func TestPerUserNeedsUserLogins(t *testing.T) {
	a := newAuth(t, false)
	srv := oauthServer("p", true)
	_, err := a.Authorize(srv, http.DefaultTransport)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "http.auth.user_logins")

	a.OnWorkspace(nil, &config.Workspace{Servers: []*config.Server{srv}, HTTP: config.HTTP{Auth: config.Auth{UserLogins: &config.UserLogins{Key: "not a key"}}}})
	_, err = a.Authorize(srv, http.DefaultTransport)
	require.Error(t, err, "a key that does not parse sets nothing up")

	good := &config.UserLogins{Key: strings.Repeat("ab", 32), Callback: "https://gw.example.com/oauth/callback"}
	a.OnWorkspace(nil, &config.Workspace{Servers: []*config.Server{srv}, HTTP: config.HTTP{Auth: config.Auth{UserLogins: good}}})
	_, err = a.Authorize(srv, http.DefaultTransport)
	require.NoError(t, err)
	users := a.users
	same := *good
	a.OnWorkspace(nil, &config.Workspace{Servers: []*config.Server{srv}, HTTP: config.HTTP{Auth: config.Auth{UserLogins: &same}}})
	assert.Same(t, users, a.users, "the same setting keeps the logins under way")
}

// The per-user logins' callback is found only once they are set up.
func TestCallback(t *testing.T) {
	a := newAuth(t, false)
	rec := httptest.NewRecorder()
	a.Callback().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/callback?state=x&code=y", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code, "no per-user logins: nothing to come back to")

	a.OnWorkspace(nil, &config.Workspace{HTTP: config.HTTP{Auth: config.Auth{UserLogins: &config.UserLogins{Key: strings.Repeat("cd", 32),
		Callback: "https://gw.example.com/oauth/callback"}}}})
	rec = httptest.NewRecorder()
	a.Callback().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/callback?state=x&code=y", nil))
	assert.NotEqual(t, http.StatusNotFound, rec.Code, "the redirects of the logins answer, refusing a state they did not issue")
}

// A login is offered to a client only for a server of the workspace that
// uses OAuth, and a shared one only where the aggregator serves one person.
func TestOfferLoginRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		shared  bool
		servers []*config.Server
		server  string
		want    string
	}{
		{"unknown server", true, []*config.Server{oauthServer("a", false)}, "b", `server "b" cannot be logged in to from here`},
		{"a server without OAuth", true, []*config.Server{{ID: "a", URL: "https://a.example.com/mcp"}}, "a", `server "a" cannot be logged in to from here`},
		{"shared logins not offered on a gateway", false, []*config.Server{oauthServer("a", false)}, "a", `server "a" cannot be logged in to from here`},
		{"a per-user login without a caller", true, []*config.Server{oauthServer("a", true)}, "a", "names none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuth(t, tc.shared)
			a.OnWorkspace(nil, &config.Workspace{Servers: tc.servers})
			_, _, _, err := a.OfferLogin(ctx, tc.server)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// A server that uses a shared OAuth login and has none stored is a
// warning at its line; a per-user server is not: its logins are each
// caller's.
func TestMissingLogins(t *testing.T) {
	newAuth(t, false) // the user config directory of the test's own
	shared := oauthServer("shared", false)
	shared.File, shared.Line = "a.yaml", 7
	problems := MissingLogins(&config.Workspace{Servers: []*config.Server{shared, oauthServer("mine", true), {ID: "plain", Command: "x"}}})
	require.Len(t, problems, 1)
	pr := problems[0]
	assert.Equal(t, config.SeverityWarning, pr.Severity)
	assert.Equal(t, "shared", pr.Server)
	assert.Equal(t, 7, pr.Line)
	assert.Contains(t, pr.Message, "not logged in")
}
