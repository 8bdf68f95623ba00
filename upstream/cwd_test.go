package upstream

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartInAMissingCwdNamesTheCwd: a working directory that is not there is what
// the start error names, not the command, which exists.
func TestStartInAMissingCwdNamesTheCwd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	tests := []struct {
		name, cwd, want string
	}{
		{"missing", filepath.Join(dir, "nosuchdir"), "does not exist"},
		{"not a directory", file, "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := demoServer("c", "tools")
			srv.Cwd = tt.cwd
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			inst, err := Start(ctx, srv, Options{Logger: newLogRecorder().Logger()})
			if inst != nil {
				_ = inst.Close()
			}
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, `"c"`, "the error names the server")
			assert.Contains(t, msg, "cwd")
			assert.Contains(t, msg, tt.cwd)
			assert.Contains(t, msg, tt.want)
			assert.NotContains(t, msg, srv.Command, "the command is not to blame")
			assert.False(t, Transient(err), "trying again cannot help")
		})
	}
}

// TestStartInAnExistingCwd: the check lets a real directory through, and the
// server runs there.
func TestStartInAnExistingCwd(t *testing.T) {
	t.Parallel()
	srv := demoServer("c", "tools")
	srv.Cwd = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	inst, err := Start(ctx, srv, Options{Logger: newLogRecorder().Logger()})
	require.NoError(t, err)
	require.NoError(t, inst.Close())
}

func TestWorkDirError(t *testing.T) {
	t.Parallel()
	assert.NoError(t, workDirError(""), "empty means the aggregator's own")
	assert.NoError(t, workDirError(t.TempDir()))
	err := workDirError(filepath.Join(t.TempDir(), "gone"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}
