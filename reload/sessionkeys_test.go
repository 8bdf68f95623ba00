package reload

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func keyLine(b byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) + "\n"
}

// The session keys follow their file: a key added there is in force once
// the file is saved, and one removed is no longer. No file: no keys, ids
// are not sealed.
func TestSessionKeysFollowTheFile(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	keys, err := SessionKeys(context.Background(), "", DefaultSettle, log)
	require.NoError(t, err)
	assert.Nil(t, keys)

	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(keyLine(1)), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys, err = SessionKeys(ctx, path, DefaultSettle, log)
	require.NoError(t, err)
	first := keys.Ring()
	require.Equal(t, 1, first.Len())
	token, err := first.Seal("s", []byte("state"))
	require.NoError(t, err)

	// A new first key; the old one still opens what it sealed.
	require.NoError(t, os.WriteFile(path, []byte(keyLine(2)+keyLine(1)), 0o600))
	require.Eventually(t, func() bool { return keys.Ring().Len() == 2 }, waitFor, DefaultSettle/10, "the new keys are in force")
	got, err := keys.Ring().Open("s", token)
	require.NoError(t, err)
	assert.Equal(t, "state", string(got))

	require.NoError(t, os.WriteFile(path, []byte(keyLine(3)), 0o600))
	require.Eventually(t, func() bool { return keys.Ring().Len() == 1 }, waitFor, DefaultSettle/10, "the key removed is no longer in force")
	_, err = keys.Ring().Open("s", token)
	assert.Error(t, err, "what only a removed key sealed no longer opens")

	_, err = SessionKeys(ctx, filepath.Join(t.TempDir(), "missing"), DefaultSettle, log)
	assert.Error(t, err, "a key file that cannot be read stops the start")
}
