package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplaceFile: --output replaces a file whole, keeping an existing file's mode and
// writing a new one for its owner alone, through a symbolic link to the file it names,
// and refuses what is not a regular file; nothing is left beside the target.
func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()

	fresh := filepath.Join(dir, "new.yaml")
	require.NoError(t, replaceFile(fresh, []byte("a\n")))
	info, err := os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	shared := write(t, filepath.Join(dir, "shared.yaml"), "old\n")
	require.NoError(t, os.Chmod(shared, 0o640))
	require.NoError(t, replaceFile(shared, []byte("b\n")))
	got, err := os.ReadFile(shared)
	require.NoError(t, err)
	assert.Equal(t, "b\n", string(got))
	info, err = os.Stat(shared)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), info.Mode().Perm())

	link := filepath.Join(dir, "link.yaml")
	require.NoError(t, os.Symlink(shared, link))
	require.NoError(t, replaceFile(link, []byte("c\n")))
	got, err = os.ReadFile(shared)
	require.NoError(t, err)
	assert.Equal(t, "c\n", string(got), "written to the file the link names")
	target, err := os.Readlink(link)
	require.NoError(t, err)
	assert.Equal(t, shared, target, "the link stays")

	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	assert.ErrorContains(t, replaceFile(sub, []byte("d\n")), "not a regular file")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"new.yaml", "shared.yaml", "link.yaml", "sub"}, names, "no temporary file left")
}
