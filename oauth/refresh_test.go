package oauth

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenEndpoint is a token endpoint that rotates refresh tokens and counts
// the refreshes it performed.
type tokenEndpoint struct {
	mu        sync.Mutex
	valid     map[string]bool // refresh tokens it takes
	forms     []url.Values
	auth      []string // Authorization headers
	next      int
	expiresIn string
	hold      chan struct{} // when set, each refresh waits for it
	// down makes it answer 503, with retryAfter as Retry-After if set.
	down       bool
	retryAfter string
	srv        *httptest.Server
}

func newTokenEndpoint(t *testing.T, refresh string) (*tokenEndpoint, *httptest.Server) {
	te := &tokenEndpoint{valid: map[string]bool{refresh: true}, expiresIn: "3600"}
	srv := httptest.NewServer(te)
	t.Cleanup(srv.Close)
	te.srv = srv
	return te, srv
}

func (te *tokenEndpoint) url(*testing.T) string { return te.srv.URL }

func (te *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if te.hold != nil {
		<-te.hold
	}
	_ = r.ParseForm()
	te.mu.Lock()
	defer te.mu.Unlock()
	te.forms = append(te.forms, r.PostForm)
	te.auth = append(te.auth, r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "application/json")
	if te.down {
		if te.retryAfter != "" {
			w.Header().Set("Retry-After", te.retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":"temporarily_unavailable"}`)
		return
	}
	rt := r.PostForm.Get("refresh_token")
	if r.PostForm.Get("grant_type") != "refresh_token" || !te.valid[rt] {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"refresh token `+rt+` is unknown"}`)
		return
	}
	delete(te.valid, rt)
	te.next++
	n := strings.Repeat("x", te.next)
	te.valid["refresh-"+n] = true
	_, _ = io.WriteString(w, `{"access_token":"access-`+n+`","token_type":"bearer","refresh_token":"refresh-`+n+`","expires_in":`+te.expiresIn+`}`)
}

func (te *tokenEndpoint) refreshes() int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return len(te.forms)
}

func TestRefreshSendsResourceAndRotates(t *testing.T) {
	te, srv := newTokenEndpoint(t, "refresh-1")
	g := testGrant("https://mcp.example/mcp")
	g.TokenURL = srv.URL
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	next, err := refresh(context.Background(), srv.Client(), g, now)
	require.NoError(t, err)
	assert.Equal(t, "access-x", next.AccessToken)
	assert.Equal(t, "refresh-x", next.RefreshToken)
	assert.Equal(t, now.Add(time.Hour), next.Expiry)
	assert.Equal(t, "access-1", g.AccessToken, "the old grant is not changed")
	require.Len(t, te.forms, 1)
	assert.Equal(t, "https://mcp.example/mcp", te.forms[0].Get("resource"))
	assert.Equal(t, "client", te.forms[0].Get("client_id"), "a public client names itself in the form")

	_, err = refresh(context.Background(), srv.Client(), g, now)
	var refused *refusedError
	require.ErrorAs(t, err, &refused, "the spent refresh token is refused")
	assert.Equal(t, "invalid_grant", refused.code)
	assert.NotContains(t, err.Error(), "refresh-1", "nothing of the body reaches the error")
}

// TestRefreshNamesTheServerWithoutItsCredentials: a grant stored with a
// resource that carries the server's credentials (a user, a query key)
// names only the server's canonical URI when it is refreshed.
func TestRefreshNamesTheServerWithoutItsCredentials(t *testing.T) {
	te, srv := newTokenEndpoint(t, "refresh-1")
	g := testGrant("https://KEY-1f2e@MCP.example:8443/mcp")
	g.TokenURL = srv.URL
	g.Resource = "https://KEY-1f2e:pw@MCP.example:8443/mcp?api_key=k-77c1#top"
	_, err := refresh(context.Background(), srv.Client(), g, time.Now())
	require.NoError(t, err)
	require.Len(t, te.forms, 1)
	assert.Equal(t, "https://mcp.example:8443/mcp", te.forms[0].Get("resource"))
}

func TestRefreshConfidentialClientUsesBasic(t *testing.T) {
	te, srv := newTokenEndpoint(t, "refresh-1")
	g := testGrant("https://mcp.example/mcp")
	g.TokenURL, g.ClientSecret, g.AuthStyle = srv.URL, "s3cret:&", AuthBasic
	_, err := refresh(context.Background(), srv.Client(), g, time.Now())
	require.NoError(t, err)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("client:"+url.QueryEscape("s3cret:&")))
	assert.Equal(t, want, te.auth[0])
	assert.Empty(t, te.forms[0].Get("client_secret"))
}

func TestParseTokenResponse(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		refused    bool
		wantErr    string
	}{
		{"ok", `{"access_token":"a","token_type":"Bearer","expires_in":"60"}`, 200, false, ""},
		{"invalid_grant", `{"error":"invalid_grant"}`, 400, true, ""},
		{"error in a 200", `{"error":"invalid_client"}`, 200, true, ""},
		{"server error", `{"error":"temporarily_unavailable"}`, 503, false, "temporarily_unavailable"},
		{"html", `<html>`, 502, false, "HTTP 502"},
		{"not a bearer token", `{"access_token":"a","token_type":"mac"}`, 200, false, "only bearer"},
		{"no access token", `{"token_type":"bearer"}`, 200, false, "no access_token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := parseTokenResponse(tt.status, "application/json", []byte(tt.body))
			var refused *refusedError
			switch {
			case tt.refused:
				require.ErrorAs(t, err, &refused)
			case tt.wantErr != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			default:
				require.NoError(t, err)
				assert.Equal(t, "a", tr.AccessToken)
				assert.Equal(t, int64(60), expiresIn(tr.ExpiresIn))
			}
		})
	}
}

func FuzzParseTokenResponse(f *testing.F) {
	f.Add(200, []byte(`{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":"r","scope":"a b"}`))
	f.Add(400, []byte(`{"error":"invalid_grant","error_description":"x"}`))
	f.Add(200, []byte(`{"access_token":"a","expires_in":"-1"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		tr, err := parseTokenResponse(status, "application/json", body)
		if err == nil && tr.AccessToken == "" {
			t.Fatal("success without an access token")
		}
		if err != nil && len(err.Error()) > 200 {
			t.Fatalf("error text too long, may echo the body: %q", err)
		}
		if tr != nil && expiresIn(tr.ExpiresIn) < 0 {
			t.Fatal("negative lifetime")
		}
	})
}

func FuzzDecodeGrant(f *testing.F) {
	f.Add([]byte(`{"server":"https://mcp.example/mcp","access_token":"a","refresh_token":"r","token_endpoint":"https://i/t","client_id":"c"}`))
	f.Add([]byte(`{"server":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := decodeGrant(data)
		if err != nil {
			return
		}
		if g.Server == "" || (g.AccessToken == "" && g.RefreshToken == "") {
			t.Fatalf("accepted an unusable grant: %+v", g)
		}
		if g.RefreshToken != "" && (g.TokenURL == "" || g.ClientID == "") {
			t.Fatal("accepted a refresh token that cannot be used")
		}
	})
}
