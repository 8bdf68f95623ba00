package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFirstLoadTellsOnlySessionsThatListed(t *testing.T) {
	var f firstLoad
	assert.False(t, f.notifies("a"), "during the first load a session that has not listed hears nothing")
	f.sawList("a")
	assert.True(t, f.notifies("a"), "one that was sent a (partial) list hears of the rest")
	assert.False(t, f.notifies("b"))
	f.forget("a")
	assert.False(t, f.notifies("a"))
	f.finish()
	assert.True(t, f.notifies("a"))
	assert.True(t, f.notifies("b"), "after the first load every session is told")
	f.sawList("c") // nothing to remember any more
	assert.Nil(t, f.listed)
}
