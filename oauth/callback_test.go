package oauth

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCallbackTakesOnlyTheAnswerToItsRequest(t *testing.T) {
	cb, err := listenCallback()
	require.NoError(t, err)
	defer cb.close()
	u, err := url.Parse(cb.redirectURI())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", u.Hostname())
	assert.Equal(t, "/callback", u.Path)
	cb.expect("the-state")

	get := func(query string) (int, string) {
		resp, err := http.Get(cb.redirectURI() + "?" + query)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, _ := get("code=forged&state=other")
	assert.Equal(t, http.StatusBadRequest, code, "a wrong state does not end the login")
	code, _ = get("state=the-state")
	assert.Equal(t, http.StatusBadRequest, code, "neither code nor error")
	code, body := get("code=c1&state=the-state&iss=https%3A%2F%2Fissuer.example")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "You can close this window")
	code, body = get("code=c2&state=the-state")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "already been answered")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cb.wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, redirect{code: "c1", state: "the-state", iss: "https://issuer.example"}, r)
}

func TestCallbackTimesOut(t *testing.T) {
	cb, err := listenCallback()
	require.NoError(t, err)
	defer cb.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = cb.wait(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timed out waiting for the browser")
}
