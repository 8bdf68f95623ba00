package reload

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// A required server that fails while the first load runs ends serve at
// once, and once; one not required, or a failure after the first load,
// does not.
func TestRequiredEndsServeOnce(t *testing.T) {
	loaded := make(chan int, 4)
	r := NewRequired(slog.New(slog.NewTextHandler(io.Discard, nil)), loaded)
	r.StartFailed("a")
	assert.Empty(t, loaded, "not armed: nothing is watched")
	r.Arm(&config.Workspace{Servers: []*config.Server{{ID: "a", Required: true}, {ID: "b"}}})
	r.StartFailed("b")
	assert.Empty(t, loaded, "b is not required")
	r.StartFailed("a")
	require.Len(t, loaded, 1)
	assert.Equal(t, 1, <-loaded)
	r.StartFailed("a")
	assert.Empty(t, loaded, "serve is told once")

	r = NewRequired(slog.New(slog.NewTextHandler(io.Discard, nil)), loaded)
	r.Arm(&config.Workspace{Servers: []*config.Server{{ID: "a", Required: true}}})
	r.Disarm()
	r.StartFailed("a")
	assert.Empty(t, loaded, "a failure after the first load keeps the last good state")
}

// The first load of a config that loads answers 0 and the workspace; one
// whose required server cannot start answers 1.
func TestFirstLoad(t *testing.T) {
	l, path, loads, _ := testLoop(t)
	loaded := make(chan int, 2)
	code, ws := l.FirstLoad(context.Background(), NewRequired(l.Logger, loaded))
	<-loads
	assert.Equal(t, 0, code)
	assert.NotNil(t, ws)

	l, path, loads, _ = testLoop(t)
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nservers:\n  r:\n    transport: streamable_http\n    url: http://127.0.0.1:1/mcp\n    required: true\n    connect_timeout: 2s\n"), 0o600))
	code, ws = l.FirstLoad(context.Background(), NewRequired(l.Logger, loaded))
	<-loads
	assert.Equal(t, 1, code, "the required server could not start")
	require.NotNil(t, ws)
	assert.LessOrEqual(t, len(loaded), 1, "serve is told at most once")
}
