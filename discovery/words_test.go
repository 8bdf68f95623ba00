package discovery

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWordTable(t *testing.T) {
	var tab wordTable
	const n = 20_000 // grows the table several times
	for i := range n {
		w := []byte(fmt.Sprintf("w%d", i))
		slot, ok := tab.find(w, hashWord(w))
		require.False(t, ok, "%s is new", w)
		tab.put(slot, w, hashWord(w), int32(i))
	}
	for i := range n {
		w := []byte(fmt.Sprintf("w%d", i))
		slot, ok := tab.find(w, hashWord(w))
		require.True(t, ok, "%s was put", w)
		assert.Equal(t, int32(i), slot.id)
	}
	// Words whose hashes collide are told apart by their bytes.
	a, b := []byte("alpha"), []byte("beta")
	var small wordTable
	slot, _ := small.find(a, 7)
	small.put(slot, a, 7, 1)
	slot, ok := small.find(b, 7)
	require.False(t, ok)
	small.put(slot, b, 7, 2)
	slot, ok = small.find(a, 7)
	require.True(t, ok)
	assert.Equal(t, int32(1), slot.id)
	slot, ok = small.find(b, 7)
	require.True(t, ok)
	assert.Equal(t, int32(2), slot.id)
}
