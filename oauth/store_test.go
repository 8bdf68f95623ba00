package oauth

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testGrant(server string) *Grant {
	return &Grant{Server: server, Resource: server, Issuer: "https://issuer.example", TokenURL: "https://issuer.example/token",
		ClientID: "client", AccessToken: "access-1", RefreshToken: "refresh-1", TokenType: "Bearer",
		Expiry: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Obtained: time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC)}
}

func TestStoreSaveLoadRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcp-aggregator")
	s := NewStore(dir)
	_, err := s.Load("https://mcp.example/mcp")
	require.ErrorIs(t, err, ErrNoGrant)

	g := testGrant("https://mcp.example/mcp")
	require.NoError(t, s.Save(g))
	got, err := s.Load(g.Server)
	require.NoError(t, err)
	assert.Equal(t, g, got)

	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	st, err = os.Stat(s.Path(g.Server))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")

	assert.NotEqual(t, s.Path(g.Server), s.Path("https://mcp.example/other"), "each URL has a file of its own")
	_, err = s.Load("https://mcp.example/other")
	assert.ErrorIs(t, err, ErrNoGrant)

	removed, err := s.Remove(g.Server)
	require.NoError(t, err)
	assert.True(t, removed)
	removed, err = s.Remove(g.Server)
	require.NoError(t, err)
	assert.False(t, removed)
}

func TestStoreRefusesBadFiles(t *testing.T) {
	s := NewStore(t.TempDir())
	server := "https://mcp.example/mcp"
	write := func(data string, mode os.FileMode) {
		require.NoError(t, os.WriteFile(s.Path(server), []byte(data), mode))
		require.NoError(t, os.Chmod(s.Path(server), mode))
	}
	tests := []struct {
		name, data, want string
		mode             os.FileMode
	}{
		{"readable by others", `{"server":"https://mcp.example/mcp","access_token":"x"}`, "chmod 600", 0o644},
		{"not JSON", `{`, "not valid JSON", 0o600},
		{"another server's", `{"server":"https://elsewhere/mcp","access_token":"x"}`, "for another server", 0o600},
		{"no token", `{"server":"https://mcp.example/mcp"}`, "holds no token", 0o600},
		{"refresh without endpoint", `{"server":"https://mcp.example/mcp","refresh_token":"r"}`, "no token endpoint", 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(tt.data, tt.mode)
			_, err := s.Load(server)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), `"x"`)
		})
	}
}
