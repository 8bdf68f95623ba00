//go:build !race

package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The _meta keys of a tools/call are told apart without allocating, long
// keys (past the 32 bytes a conversion may keep on the stack) included.
// (The race detector's instrumentation allocates too, so this runs
// without it.)
func TestWithheldMetaAllocations(t *testing.T) {
	keys := [][]byte{[]byte("progressToken"), []byte("io.modelcontextprotocol/related-task"), []byte(LeaseMetaKey),
		[]byte("a-long-key-of-more-than-thirty-two-bytes"), []byte("k")}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			withheldMeta(k)
		}
	}))
	assert.True(t, withheldMeta(keys[0]))
	assert.True(t, withheldMeta(keys[1]))
	assert.True(t, withheldMeta(keys[2]))
	assert.False(t, withheldMeta(keys[3]))
	assert.False(t, withheldMeta(keys[4]))
}
