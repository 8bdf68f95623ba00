package proxy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// The record of requests running on instances: only names the one request
// on an instance when there is exactly one, an added request stays until
// it is removed as many times as it was added, and a call through the
// record allocates nothing once it has run before.
func TestInflight(t *testing.T) {
	var f inflight
	a, b := &upstream.Instance{}, &upstream.Instance{}
	r1, r2 := &downstream.Request{}, &downstream.Request{}
	assert.Nil(t, f.only(a))

	f.add(a, r1)
	f.add(a, r1)
	f.add(b, r2)
	assert.Same(t, r1, f.only(a), "one request, running twice, is the one")
	assert.Same(t, r2, f.only(b))

	f.add(a, r2)
	assert.Nil(t, f.only(a), "two requests on a: neither is the one")
	f.remove(a, r1)
	assert.Nil(t, f.only(a), "r1 still runs on a once")
	f.remove(a, r1)
	assert.Same(t, r2, f.only(a))
	f.remove(a, r2)
	f.remove(a, r2) // removing what is not there changes nothing
	assert.Nil(t, f.only(a))
	assert.Same(t, r2, f.only(b))
	f.remove(b, r2)
	assert.Nil(t, f.only(b))
	assert.Len(t, f.on, 1, "the instance emptied last keeps its entry, and only it")
	assert.Contains(t, f.on, b)
	f.add(a, r1)
	f.remove(a, r1)
	assert.Len(t, f.on, 1)
	assert.Contains(t, f.on, a, "a emptied last: b is forgotten")
	assert.Nil(t, f.only(a))

	allocs := testing.AllocsPerRun(100, func() {
		f.add(a, r1)
		f.remove(a, r1)
	})
	assert.Zero(t, allocs)
}

// BenchmarkInflight is one call's add and remove, alone on its instance
// and among 15 and 255 others running on it, all older than it: its
// remove scans them all, the list's worst case.
func BenchmarkInflight(b *testing.B) {
	for _, others := range []int{0, 15, 255} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			var f inflight
			inst, req := &upstream.Instance{}, &downstream.Request{}
			for range others {
				f.add(inst, &downstream.Request{})
			}
			b.ReportAllocs()
			for b.Loop() {
				f.add(inst, req)
				f.remove(inst, req)
			}
		})
	}
}
