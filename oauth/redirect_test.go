package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// elsewhere is a server of another origin that counts what reaches it.
func elsewhere(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("refresh_token") != "" || r.PostForm.Get("token") != "" || r.Header.Get("Authorization") != "" {
			hits.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"stolen","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// redirector answers every request with a 307 to target, which makes an
// HTTP client send the same POST body there.
func redirector(t *testing.T, target string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRefreshFollowsNoRedirect: a token endpoint that redirects does not
// get the refresh token (or the client's secret) sent on to another
// server, and the refresh fails saying why.
func TestRefreshFollowsNoRedirect(t *testing.T) {
	other, hits := elsewhere(t)
	te := redirector(t, other.URL+"/token")
	g := &Grant{Server: "https://mcp.example.com/mcp", TokenURL: te.URL + "/token", ClientID: "c1", ClientSecret: "s3cret",
		AuthStyle: AuthPost, RefreshToken: "refresh-0123456789"}
	_, err := refresh(context.Background(), &http.Client{Timeout: 5 * time.Second}, g, time.Now())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "307")
	assert.Zero(t, hits.Load(), "the refresh token went to the server the token endpoint redirected to")
}

// TestRevokeFollowsNoRedirect: the same for a revocation endpoint.
func TestRevokeFollowsNoRedirect(t *testing.T) {
	other, hits := elsewhere(t)
	re := redirector(t, other.URL+"/revoke")
	g := &Grant{Server: "https://mcp.example.com/mcp", RevocationURL: re.URL + "/revoke", ClientID: "c1",
		AccessToken: "access-0123456789", RefreshToken: "refresh-0123456789"}
	err := Revoke(context.Background(), &http.Client{Timeout: 5 * time.Second}, g)
	require.Error(t, err)
	assert.Zero(t, hits.Load(), "a token went to the server the revocation endpoint redirected to")
}

// TestRevokeSendsTokensOnlyOverHTTPS: a revocation endpoint that would
// carry the tokens in clear to another host is not used.
func TestRevokeSendsTokensOnlyOverHTTPS(t *testing.T) {
	g := &Grant{Server: "https://mcp.example.com/mcp", RevocationURL: "http://198.51.100.7/revoke", ClientID: "c1",
		AccessToken: "access-0123456789", RefreshToken: "refresh-0123456789"}
	var sent atomic.Int32
	client := &http.Client{Timeout: time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return nil, http.ErrHandlerTimeout
	})}
	err := Revoke(context.Background(), client, g)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "https")
	assert.Zero(t, sent.Load(), "a token went out over plain http")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
