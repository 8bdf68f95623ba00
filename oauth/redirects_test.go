package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedirectsAnswerEachLoginByItsState(t *testing.T) {
	rs := NewRedirects("https://gw.example.com/oauth/callback")
	alice, bob := rs.begin(), rs.begin()
	alice.expect("state-a")
	bob.expect("state-b")
	defer alice.close()
	defer bob.close()
	assert.Equal(t, "https://gw.example.com/oauth/callback", alice.redirectURI())

	get := func(query string) int {
		rec := httptest.NewRecorder()
		rs.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/callback?"+query, nil))
		return rec.Code
	}
	assert.Equal(t, http.StatusBadRequest, get("code=x&state=forged"), "a state no login waits for ends none")
	assert.Equal(t, http.StatusBadRequest, get("state=state-b"), "neither a code nor an error")
	assert.Equal(t, http.StatusOK, get("code=code-b&state=state-b"))
	assert.Equal(t, http.StatusBadRequest, get("code=again&state=state-b"), "one answer per login")

	got, err := bob.wait(context.Background())
	require.NoError(t, err)
	assert.Equal(t, redirect{code: "code-b", state: "state-b"}, got)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = alice.wait(ctx)
	assert.Error(t, err, "alice's login got nothing of bob's")
	alice.close()
	assert.Equal(t, http.StatusBadRequest, get("code=late&state=state-a"), "a login that ended takes no answer")
}
