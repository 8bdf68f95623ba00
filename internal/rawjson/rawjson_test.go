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
