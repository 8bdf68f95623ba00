//go:build !race

package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A tools/call's params cost one allocation, the params written, and one
// more when _meta loses a key the caller withholds but keeps others (the
// _meta that goes up). The keys kept cost nothing. (The race detector's instrumentation
// allocates too, so this runs without it.)
func TestCallParamsAllocations(t *testing.T) {
	for _, c := range []struct {
		meta   string
		allocs float64
	}{
		{`{"k":1}`, 1},
		{`{"traceparent":"00-1-2-01","a-long-key-of-more-than-thirty-two-bytes":1}`, 1},
		{`{"progressToken":1}`, 1},
		{`{"progressToken":1,"io.modelcontextprotocol/related-task":{}}`, 1},
		{`{"progressToken":1,"traceparent":"00-1-2-01"}`, 2},
	} {
		call := Call{Name: "echo", Params: json.RawMessage(`{"name":"srv_echo","arguments":{"text":"hi"},"_meta":` + c.meta + `}`),
			Arguments: json.RawMessage(`{"text":"hi"}`), Withhold: withheldForTest}
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := encodeCallParams(call); err != nil {
				t.Fatal(err)
			}
		})
		assert.Equal(t, c.allocs, allocs, "_meta %s", c.meta)
	}
}
