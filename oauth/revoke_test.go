package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// revocationServer is an issuer with RFC 8414 metadata and, unless
// noEndpoint, an RFC 7009 endpoint that records what it is sent.
type revocationServer struct {
	mu         sync.Mutex
	url        string
	noEndpoint bool
	status     int
	got        []string // "hint token client_id basic-user" per request
}

func newRevocationServer(t *testing.T) *revocationServer {
	rs := &revocationServer{status: http.StatusOK}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	rs.url = srv.URL
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		meta := map[string]any{"issuer": rs.url, "authorization_endpoint": rs.url + "/authorize", "token_endpoint": rs.url + "/token",
			"code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"}}
		if !rs.noEndpoint {
			meta["revocation_endpoint"] = rs.url + "/revoke"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(meta)
	})
	mux.HandleFunc("/revoke", func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		user, _, _ := r.BasicAuth()
		rs.mu.Lock()
		rs.got = append(rs.got, r.PostForm.Get("token_type_hint")+" "+r.PostForm.Get("token")+" "+r.PostForm.Get("client_id")+" "+user)
		status := rs.status
		rs.mu.Unlock()
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"refresh-1 is not yours"}`))
		}
	})
	return rs
}

func TestRevoke(t *testing.T) {
	rs := newRevocationServer(t)
	g := testGrant("https://mcp.example/mcp")
	g.Issuer = rs.url
	require.NoError(t, Revoke(context.Background(), http.DefaultClient, g))
	assert.Equal(t, []string{"refresh_token refresh-1 client ", "access_token access-1 client "}, rs.got,
		"the refresh token first, found through the issuer's metadata; a public client names itself")

	rs.got = nil
	g.RevocationURL, g.Issuer = rs.url+"/revoke", "https://unreachable.invalid"
	g.ClientSecret, g.AuthStyle = "s3cret", AuthBasic
	require.NoError(t, Revoke(context.Background(), http.DefaultClient, g), "the endpoint noted at login is used as is")
	assert.Equal(t, []string{"refresh_token refresh-1  client", "access_token access-1  client"}, rs.got, "a confidential client authenticates as at the token endpoint")

	rs.status = http.StatusUnauthorized
	err := Revoke(context.Background(), http.DefaultClient, g)
	require.Error(t, err)
	assert.Equal(t, "revoking the refresh token: the revocation endpoint answered HTTP 401 with error invalid_client", err.Error())

	none := newRevocationServer(t)
	none.noEndpoint = true
	g = testGrant("https://mcp.example/mcp")
	g.Issuer = none.url
	assert.ErrorIs(t, Revoke(context.Background(), http.DefaultClient, g), ErrNoRevocation)
	g.Issuer = ""
	assert.ErrorIs(t, Revoke(context.Background(), http.DefaultClient, g), ErrNoRevocation)
}
