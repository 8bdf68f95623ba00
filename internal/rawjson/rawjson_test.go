package rawjson

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarshalKeepsBytes(t *testing.T) {
	raw := json.RawMessage(`{"reason":"<b> & \"q\"","n":12345678901234567890}`)
	out, err := Marshal(map[string]any{"data": raw})
	require.NoError(t, err)
	assert.Equal(t, `{"data":{"reason":"<b> & \"q\"","n":12345678901234567890}}`, string(out))
	std, _ := json.Marshal(map[string]any{"data": raw})
	assert.NotEqual(t, string(std), string(out), "encoding/json escapes HTML; Marshal must not")
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "echo", "mcp__fs__read_file", `quote"back\slash`, "tab\there", "é中🚀", "<&>", "\x00\x1f\x7f"} {
		got := AppendString([]byte("x"), s)
		var back string
		require.NoError(t, json.Unmarshal(got[1:], &back), "%q encodes to invalid JSON %s", s, got)
		assert.Equal(t, s, back)
	}
}
