package sameorigin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOrigin(t *testing.T) {
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		require.NoError(t, err)
		return u
	}
	assert.Equal(t, "https://example.com:443", Origin(parse("https://Example.COM/mcp")))
	assert.Equal(t, Origin(parse("https://example.com/a")), Origin(parse("HTTPS://example.com:443/b")))
	assert.NotEqual(t, Origin(parse("https://example.com/")), Origin(parse("http://example.com/")))
	assert.NotEqual(t, Origin(parse("https://example.com/")), Origin(parse("https://example.com:8443/")))
	assert.NotEqual(t, Origin(parse("https://example.com/")), Origin(parse("https://api.example.com/")))
	assert.Empty(t, Origin(parse("/relative")))
}

// TestClientKeepsTheClientsOwnRedirectPolicy: the client's own
// CheckRedirect still decides, and without one Go's limit of 10 holds.
func TestClientKeepsTheClientsOwnRedirectPolicy(t *testing.T) {
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	t.Cleanup(loop.Close)
	_, err := Client(&http.Client{}, Policy{}).Get(loop.URL)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stopped after 10 redirects")

	stop := errors.New("no redirects here")
	_, err = Client(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return stop }}, Policy{}).Get(loop.URL)
	require.ErrorIs(t, err, stop)
}
