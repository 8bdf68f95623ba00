package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// The record of requests running on instances: only names the one request
// on an instance when there is exactly one, an added request stays until
// it is removed (adding it twice changes nothing), and a call through the
// record allocates nothing once it has run before.
func TestInflight(t *testing.T) {
	var f inflight
	a, b := &upstream.Instance{}, &upstream.Instance{}
	r1, r2 := &downstream.Request{}, &downstream.Request{}
	assert.Nil(t, f.only(a))

	f.add(a, r1)
	f.add(a, r1)
	f.add(b, r2)
	assert.Same(t, r1, f.only(a))
	assert.Same(t, r2, f.only(b))

	f.add(a, r2)
	assert.Nil(t, f.only(a), "two requests on a: neither is the one")
	f.remove(a, r1)
	assert.Same(t, r2, f.only(a))
	f.remove(a, r2)
	f.remove(a, r2) // removing what is not there changes nothing
	assert.Nil(t, f.only(a))
	assert.Same(t, r2, f.only(b))
	f.remove(b, r2)
	assert.Empty(t, f.on)

	allocs := testing.AllocsPerRun(100, func() {
		f.add(a, r1)
		f.remove(a, r1)
	})
	assert.Zero(t, allocs)
}
