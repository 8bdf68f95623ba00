//go:build !race

package rawjson

import "testing"

// Edits allocates its output alone.
func TestEditsAllocations(t *testing.T) {
	obj := []byte(`{"content":[{"type":"text","text":"hi"}],"_meta":{"a":1},"gone":true}`)
	meta := []byte(`{"b":2}`)
	allocs := testing.AllocsPerRun(100, func() {
		_ = Edits(obj,
			Edit{Name: "_meta", Value: func([]byte) []byte { return meta }},
			Edit{Name: "resultType", Value: func([]byte) []byte { return []byte(`"complete"`) }},
			Edit{Name: "gone", Value: func([]byte) []byte { return nil }},
		)
	})
	// The output, and the closures, which escape through the calls of
	// them.
	if allocs > 4 {
		t.Fatalf("Edits: %v allocations", allocs)
	}
}
