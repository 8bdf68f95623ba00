package downstream

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// A stdio batch's array holds at most DefaultMaxBatchBytes of answers:
// each answer past it is an error saying so.
func TestBatchStdioHoldsAtMostMaxBatchBytes(t *testing.T) {
	const size, n = 1 << 20, 20 // 20 MiB of answers in all
	h := batchFake(bigResult(size))
	p := startStdio(t, h, StdioOptions{})
	p.out.Buffer(nil, 2*DefaultMaxBatchBytes)
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}}`)
	assert.JSONEq(t, `0`, string(p.nextMsg(t).ID))

	p.send(t, batchOf(n))
	require.True(t, p.out.Scan(), "no answer: %v", p.out.Err())
	ids, results := batchAnswers(t, p.out.Bytes(), func(e *jsonrpc.Error) {
		assert.Contains(t, e.Message, "past 16777216 bytes")
		assert.Contains(t, e.Message, "send the request on its own")
	})
	assert.Len(t, ids, n, "every request is answered")
	assert.Positive(t, results, "the answers that fit are given")
	assert.LessOrEqual(t, results*size, DefaultMaxBatchBytes, "no more than the bound of answers")
	assert.Less(t, results, n, "the answers past the bound are errors")
}
