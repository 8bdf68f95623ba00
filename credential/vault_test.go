package credential

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
)

func newKey(t *testing.T) []byte {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return key
}

func TestVaultSealsEachEntry(t *testing.T) {
	dir := t.TempDir()
	v, err := NewVault(dir, newKey(t))
	require.NoError(t, err)
	alice := VaultEntry{Server: "linear", Principal: identity.Subject("https://id.example.com", "alice")}
	bob := VaultEntry{Server: "linear", Principal: identity.Subject("https://id.example.com", "bob")}
	secret := []byte(`{"access_token":"alice-at-7f3e","refresh_token":"alice-rt-19c2"}`)

	_, err = v.Get(alice)
	assert.ErrorIs(t, err, ErrNotStored)
	require.NoError(t, v.Put(alice, secret))
	got, err := v.Get(alice)
	require.NoError(t, err)
	assert.Equal(t, secret, got)
	_, err = v.Get(bob)
	assert.ErrorIs(t, err, ErrNotStored, "another user of the same client has nothing")

	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, files, 1)
	raw, err := os.ReadFile(filepath.Join(dir, files[0].Name()))
	require.NoError(t, err)
	for _, clear := range [][]byte{[]byte("alice"), []byte("alice-at-7f3e"), []byte("linear"), []byte("agent")} {
		assert.False(t, bytes.Contains(raw, clear), "%s is readable at rest", clear)
		assert.NotContains(t, files[0].Name(), string(clear))
	}
	info, err := files[0].Info()
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// The file moved to bob's name does not open as bob's.
	require.NoError(t, os.Rename(v.path(alice), v.path(bob)))
	_, err = v.Get(bob)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNotStored)

	other, err := NewVault(dir, newKey(t))
	require.NoError(t, err)
	require.NoError(t, v.Put(alice, secret))
	_, err = other.Get(alice)
	assert.ErrorContains(t, err, "does not open with the vault key")

	require.NoError(t, v.Delete(alice))
	require.NoError(t, v.Delete(alice))
	_, err = v.Get(alice)
	assert.ErrorIs(t, err, ErrNotStored)
}

func TestVaultKeys(t *testing.T) {
	key := newKey(t)
	for _, text := range []string{hex.EncodeToString(key), " " + base64.StdEncoding.EncodeToString(key) + "\n"} {
		got, err := ParseKey(text)
		require.NoError(t, err)
		assert.Equal(t, key, got)
	}
	_, err := ParseKey("not-a-key-but-a-secret-looking-text")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret-looking")
	_, err = NewVault(t.TempDir(), key[:16])
	assert.ErrorContains(t, err, "32 bytes")

	path := filepath.Join(t.TempDir(), "vault.key")
	require.NoError(t, os.WriteFile(path, []byte(hex.EncodeToString(key)), 0o644))
	_, err = ReadKeyFile(path)
	assert.ErrorContains(t, err, "chmod 600")
	require.NoError(t, os.Chmod(path, 0o600))
	got, err := ReadKeyFile(path)
	require.NoError(t, err)
	assert.Equal(t, key, got)
}

// TestVaultBoundAndSweep: a new entry over SetMax is refused with a clear
// error while replacing one is not; Sweep removes the entries neither
// written nor touched since the time given.
func TestVaultBoundAndSweep(t *testing.T) {
	dir := t.TempDir()
	v, err := NewVault(dir, newKey(t))
	require.NoError(t, err)
	v.SetMax(2)
	entry := func(sub string) VaultEntry {
		return VaultEntry{Server: "linear", Principal: identity.Subject("https://id.example.com", sub)}
	}
	require.NoError(t, v.Put(entry("alice"), []byte("a")))
	require.NoError(t, v.Put(entry("bob"), []byte("b")))
	err = v.Put(entry("carol"), []byte("c"))
	require.ErrorIs(t, err, ErrVaultFull)
	assert.ErrorContains(t, err, "max_logins")
	require.NoError(t, v.Put(entry("alice"), []byte("a2")), "replacing an entry is not a new one")
	n, err := v.Len()
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	// bob's file is old; alice's is touched now.
	old := time.Now().Add(-48 * time.Hour)
	for _, e := range []VaultEntry{entry("alice"), entry("bob")} {
		require.NoError(t, os.Chtimes(v.path(e), old, old))
	}
	require.NoError(t, v.Touch(entry("alice")))
	require.NoError(t, v.Touch(entry("nobody")), "touching nothing stored is no error")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600))
	require.NoError(t, os.Chtimes(filepath.Join(dir, "notes.txt"), old, old))
	swept, err := v.Sweep(time.Now().Add(-24 * time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 1, swept)
	_, err = v.Get(entry("bob"))
	assert.ErrorIs(t, err, ErrNotStored, "bob's unused entry went")
	got, err := v.Get(entry("alice"))
	require.NoError(t, err)
	assert.Equal(t, []byte("a2"), got)
	assert.FileExists(t, filepath.Join(dir, "notes.txt"), "a file of no entry's name is left alone")
	require.NoError(t, v.Put(entry("carol"), []byte("c")), "room again")
}
