package sameorigin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeadersGoToTheOriginAlone: Headers sets the headers on requests to
// its origin, whoever built them, and on none to another origin, a
// redirect's target included; the request it is given stays as it was.
func TestHeadersGoToTheOriginAlone(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]http.Header{}
	record := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name+" "+r.URL.Path] = r.Header.Clone()
			mu.Unlock()
		})
	}
	other := httptest.NewServer(record("other"))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.Handle("/", record("own"))
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/target", http.StatusTemporaryRedirect)
	})
	own := httptest.NewServer(mux)
	t.Cleanup(own.Close)

	u, err := url.Parse(own.URL)
	require.NoError(t, err)
	headers := map[string]string{"X-Api-Key": "key-1", "Authorization": "Bearer tok-1"}
	client := Client(&http.Client{Transport: Headers(http.DefaultTransport, Origin(u), headers)},
		Policy{Headers: HeaderNames(headers)})

	req, err := http.NewRequest(http.MethodDelete, own.URL+"/mcp", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, req.Header, "the request given was changed")
	for _, path := range []string{"/direct", "/away"} {
		resp, err := client.Get(own.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
	}
	resp, err = client.Get(other.URL + "/asked")
	require.NoError(t, err)
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	for _, key := range []string{"own /mcp", "own /direct"} {
		require.Contains(t, seen, key)
		assert.Equal(t, "key-1", seen[key].Get("X-Api-Key"), key)
		assert.Equal(t, "Bearer tok-1", seen[key].Get("Authorization"), key)
	}
	for _, key := range []string{"other /target", "other /asked"} {
		require.Contains(t, seen, key)
		assert.Empty(t, seen[key].Get("X-Api-Key"), key)
		assert.Empty(t, seen[key].Get("Authorization"), key)
	}
}

func TestHeadersWithNothingToAdd(t *testing.T) {
	base := http.DefaultTransport
	assert.Same(t, base, Headers(base, "", map[string]string{"X": "y"}))
	assert.Same(t, base, Headers(base, "http://example.com:80", nil))
}

// TestRefuseBodyKeepsTheBodyAtItsOrigin: with RefuseBody, a redirect that
// would send a request's body to another origin fails, naming both, and the
// other origin gets nothing; one within the origin is followed.
func TestRefuseBodyKeepsTheBodyAtItsOrigin(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.URL.Path)
		mu.Unlock()
	}))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/target", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	own := httptest.NewServer(mux)
	t.Cleanup(own.Close)
	client := Client(&http.Client{}, Policy{RefuseBody: true})

	u, err := url.Parse(own.URL)
	require.NoError(t, err)
	o, err := url.Parse(other.URL)
	require.NoError(t, err)
	_, err = client.Post(own.URL+"/away", "application/json", strings.NewReader(`{"secret":1}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), Origin(u)+" redirected the request to "+Origin(o)+", another origin")
	mu.Lock()
	assert.Empty(t, reached, "the other origin was sent the request")
	mu.Unlock()

	resp, err := client.Post(own.URL+"/moved", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err, "a redirect within the origin is followed")
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
}
