package downstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzSplitBatch: whatever a client sends as a batch is either split into
// messages that each decode or are answered on their own, or refused as a
// whole with an error; the answer to a batch is always a JSON array.
func FuzzSplitBatch(f *testing.F) {
	for _, seed := range []string{
		`[]`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `[1,2,3]`, `[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":"a","result":{}}]`,
		"\xef\xbb\xbf [{}]", `[`, `[[]]`, `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, `[null]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		elems, rpcErr := splitBatch(data, batchProtocol)
		if rpcErr != nil {
			require.Nil(t, elems)
			assert.NotEmpty(t, rpcErr.Message)
			return
		}
		require.NotEmpty(t, elems)
		require.LessOrEqual(t, len(elems), MaxBatch)
		b := &batchAnswer{}
		for _, raw := range elems {
			msg, answer := decodeBatched(raw)
			if msg == nil {
				require.True(t, json.Valid(answer), "%s", answer)
				b.add(answer)
			}
		}
		if array := b.array(); array != nil {
			var out []json.RawMessage
			require.NoError(t, json.Unmarshal(array, &out), "%s", array)
		}
	})
}

func TestSplitBatchRefusals(t *testing.T) {
	for _, tc := range []struct{ data, protocol, want string }{
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "send initialize alone first"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "2025-06-18", "this session speaks 2025-06-18"},
		{`[]`, batchProtocol, "an empty batch"},
		{`[{]`, batchProtocol, "not a valid JSON array"},
	} {
		_, rpcErr := splitBatch([]byte(tc.data), tc.protocol)
		if assert.NotNil(t, rpcErr, tc.data) {
			assert.Contains(t, rpcErr.Message, tc.want)
		}
	}
}
