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
