package pipeio

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OneProcessor sets one processor and logs the number it replaced, unless
// GOMAXPROCS is set, which it leaves to rule.
func TestOneProcessor(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	runtime.GOMAXPROCS(3)

	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Setenv("GOMAXPROCS", "3")
	OneProcessor(log)
	assert.Equal(t, 3, runtime.GOMAXPROCS(0), "GOMAXPROCS set: left as it is")
	assert.Empty(t, buf.String())

	t.Setenv("GOMAXPROCS", "")
	OneProcessor(log)
	assert.Equal(t, 1, runtime.GOMAXPROCS(0))
	var rec struct {
		Msg string `json:"msg"`
		Was int    `json:"was"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), buf.String())
	assert.Equal(t, "serving stdio on one processor", rec.Msg)
	assert.Equal(t, 3, rec.Was)
}
