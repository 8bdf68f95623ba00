package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func workspace(tokens map[string]string) *config.Workspace {
	ws := &config.Workspace{}
	ws.HTTP.Auth.Tokens = tokens
	return ws
}

func TestAccessStartRefusesAnOpenForeignBind(t *testing.T) {
	require.NoError(t, NewAccess(quiet(), "127.0.0.1:8080", false).Start(workspace(nil), nil))
	assert.ErrorContains(t, NewAccess(quiet(), "0.0.0.0:8080", false).Start(workspace(nil), nil), "without http.auth")
	assert.NoError(t, NewAccess(quiet(), "0.0.0.0:8080", true).Start(workspace(nil), nil), "--allow-unauthenticated")
	assert.NoError(t, NewAccess(quiet(), "0.0.0.0:8080", false).Start(workspace(map[string]string{"a": "tok-a"}), nil))
	assert.ErrorContains(t, NewAccess(quiet(), "0.0.0.0:8080", false).Start(nil, nil), "cannot be told")
}

// status sends a request with token (none when empty) through a.protect and
// returns the status and the client the endpoint saw.
func status(t *testing.T, a *Access, token string) (int, string) {
	t.Helper()
	var client string
	h := a.protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Get("Authorization"), "the token stops at the gateway")
		client = identity.CallerOf(r.Context()).Client
	}))
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, client
}

func TestAccessFollowsReloads(t *testing.T) {
	a := NewAccess(quiet(), "127.0.0.1:8080", false)
	require.NoError(t, a.Start(workspace(map[string]string{"a": "tok-a"}), nil))
	code, client := status(t, a, "tok-a")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a", client)
	code, _ = status(t, a, "")
	assert.Equal(t, http.StatusUnauthorized, code)

	a.Apply(workspace(map[string]string{"b": "tok-b"}))
	code, _ = status(t, a, "tok-a")
	assert.Equal(t, http.StatusUnauthorized, code, "a withdrawn token is refused at once")
	code, client = status(t, a, "tok-b")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "b", client)

	a.Apply(workspace(nil))
	code, client = status(t, a, "")
	assert.Equal(t, http.StatusOK, code, "on loopback, removing http.auth is followed")
	assert.Empty(t, client)
}

func TestAccessKeepsAuthOnAForeignBind(t *testing.T) {
	a := NewAccess(quiet(), "0.0.0.0:8080", false)
	require.NoError(t, a.Start(workspace(map[string]string{"a": "tok-a"}), nil))
	a.Apply(workspace(nil))
	code, _ := status(t, a, "")
	assert.Equal(t, http.StatusUnauthorized, code, "a non-loopback gateway keeps its authentication")
	code, _ = status(t, a, "tok-a")
	assert.Equal(t, http.StatusOK, code)
}
