package jsonrpc

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AppendRequestLine writes what AppendLine writes for the same request.
func TestAppendRequestLineMatchesAppendLine(t *testing.T) {
	for _, id := range []int64{0, 7, 1 << 40, math.MaxInt64, math.MinInt64} {
		for _, params := range []json.RawMessage{nil, json.RawMessage(`{"name":"echo","arguments":{"text":"hi \"x\""}}`), json.RawMessage(`[1,2]`)} {
			req, err := Request(IntID(id), "tools/call", params)
			require.NoError(t, err)
			want := AppendLine([]byte("prefix"), req)
			got := AppendRequestLine([]byte("prefix"), id, "tools/call", params)
			assert.Equal(t, string(want), string(got))
			msg, err := Decode(got[len("prefix") : len(got)-1])
			require.NoError(t, err)
			assert.Equal(t, string(IntID(id)), string(msg.ID))
		}
	}
}
