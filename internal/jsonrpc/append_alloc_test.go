//go:build !race

package jsonrpc

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A line is built with one allocation, the line itself: it is built for
// every message on the call path. (The race detector's instrumentation
// allocates too, so this runs without it.)
func TestAppendLineAllocatesOnce(t *testing.T) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`)
	allocs := testing.AllocsPerRun(100, func() { _ = AppendRequestLine(nil, 123456789, "tools/call", params) })
	assert.Equal(t, 1.0, allocs)
	resp := &Message{ID: IntID(42), Result: json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`)}
	allocs = testing.AllocsPerRun(100, func() { _ = AppendLine(nil, resp) })
	assert.Equal(t, 1.0, allocs)
}

// DecodeBorrowed allocates nothing for a valid message but an error
// object: the upstream's reader decodes every answer with it.
func TestDecodeBorrowedAllocatesNothing(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"hello"}]}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"agg-1","progress":1}}`,
		`{"jsonrpc":"2.0","id":"a","method":"ping"}`,
	} {
		data := []byte(line)
		var m Message
		allocs := testing.AllocsPerRun(100, func() {
			if err := DecodeBorrowed(&m, data); err != nil {
				t.Fatal(err)
			}
		})
		assert.Equal(t, 0.0, allocs, line)
	}
}
