package oauth

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testIssuer is the issuer of testGrant's tokens.
const testIssuer = "https://issuer.example"

func testGrant(server string) *Grant {
	return &Grant{Server: server, Resource: server, Issuer: testIssuer, TokenURL: "https://issuer.example/token",
		ClientID: "client", AccessToken: "access-1", RefreshToken: "refresh-1", TokenType: "Bearer",
		Expiry: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Obtained: time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC)}
}

func TestStoreSaveLoadRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcp-aggregator")
	s := NewStore(dir)
	_, err := s.Load("https://mcp.example/mcp", testIssuer)
	require.ErrorIs(t, err, ErrNoGrant)

	g := testGrant("https://mcp.example/mcp")
	require.NoError(t, s.Save(g))
	got, err := s.Load(g.Server, testIssuer)
	require.NoError(t, err)
	assert.Equal(t, g, got)
	got, err = s.Load(g.Server, testIssuer+"/")
	require.NoError(t, err, "a trailing slash names the same issuer")
	assert.Equal(t, g, got)

	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	st, err = os.Stat(s.Path(g.Server, g.Issuer))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")

	assert.NotEqual(t, s.Path(g.Server, testIssuer), s.Path("https://mcp.example/other", testIssuer), "each URL has a file of its own")
	_, err = s.Load("https://mcp.example/other", testIssuer)
	assert.ErrorIs(t, err, ErrNoGrant)

	removed, err := s.Remove(g.Server, testIssuer)
	require.NoError(t, err)
	assert.True(t, removed)
	removed, err = s.Remove(g.Server, testIssuer)
	require.NoError(t, err)
	assert.False(t, removed)
}

// A server's grants are kept per issuer: a login with the server's new
// authorization server leaves the old one's grant alone, and neither is
// ever returned for the other issuer.
func TestStoreKeysByURLAndIssuer(t *testing.T) {
	s := NewStore(t.TempDir())
	server := "https://mcp.example/mcp"
	old := testGrant(server)
	require.NoError(t, s.Save(old))
	moved := testGrant(server)
	moved.Issuer, moved.TokenURL = "https://new-issuer.example", "https://new-issuer.example/token"
	moved.AccessToken, moved.RefreshToken = "access-new", "refresh-new"
	moved.Obtained = old.Obtained.Add(time.Minute)
	require.NoError(t, s.Save(moved))
	assert.NotEqual(t, s.Path(server, old.Issuer), s.Path(server, moved.Issuer))

	got, err := s.Load(server, old.Issuer)
	require.NoError(t, err)
	assert.Equal(t, "access-1", got.AccessToken, "the new issuer's login did not clobber the old")
	got, err = s.Load(server, moved.Issuer)
	require.NoError(t, err)
	assert.Equal(t, "access-new", got.AccessToken)
	_, err = s.Load(server, "https://third.example")
	assert.ErrorIs(t, err, ErrNoGrant, "no grant of another issuer stands in")

	all, err := s.LoadAll(server)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, moved.Issuer, all[0].Issuer, "newest first")
	other, err := s.LoadAll("https://mcp.example/other")
	require.NoError(t, err)
	assert.Empty(t, other)

	// A file copied under another issuer's name is not taken for it.
	data, err := os.ReadFile(s.Path(server, old.Issuer))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(s.Path(server, "https://third.example"), data, 0o600))
	_, err = s.Load(server, "https://third.example")
	assert.ErrorContains(t, err, "another server or issuer")
	_, err = s.LoadAll(server)
	assert.ErrorContains(t, err, "another server or issuer")

	n, err := s.RemoveAll(server)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	all, err = s.LoadAll(server)
	require.NoError(t, err)
	assert.Empty(t, all)
}

func TestStoreRefusesBadFiles(t *testing.T) {
	s := NewStore(t.TempDir())
	server := "https://mcp.example/mcp"
	path := s.Path(server, testIssuer)
	write := func(data string, mode os.FileMode) {
		require.NoError(t, os.WriteFile(path, []byte(data), mode))
		require.NoError(t, os.Chmod(path, mode))
	}
	tests := []struct {
		name, data, want string
		mode             os.FileMode
	}{
		{"readable by others", `{"server":"https://mcp.example/mcp","issuer":"https://issuer.example","access_token":"x"}`, "chmod 600", 0o644},
		{"not JSON", `{`, "not valid JSON", 0o600},
		{"another server's", `{"server":"https://elsewhere/mcp","issuer":"https://issuer.example","access_token":"x"}`, "for another server", 0o600},
		{"another issuer's", `{"server":"https://mcp.example/mcp","issuer":"https://elsewhere","access_token":"x"}`, "another server or issuer", 0o600},
		{"no token", `{"server":"https://mcp.example/mcp"}`, "holds no token", 0o600},
		{"refresh without endpoint", `{"server":"https://mcp.example/mcp","refresh_token":"r"}`, "no token endpoint", 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(tt.data, tt.mode)
			_, err := s.Load(server, testIssuer)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), `"x"`)
		})
	}
}
