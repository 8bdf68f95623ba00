//go:build !race

package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A tools/call's params cost one allocation: the params written. (The race
// detector's instrumentation allocates too, so this runs without it.)
func TestCallParamsAllocations(t *testing.T) {
	call := Call{Name: "echo", Params: json.RawMessage(`{"name":"srv_echo","arguments":{"text":"hi"},"_meta":{"k":1}}`),
		Arguments: json.RawMessage(`{"text":"hi"}`), Withhold: withheldForTest}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := encodeCallParams(call); err != nil {
			t.Fatal(err)
		}
	})
	assert.Equal(t, 1.0, allocs)
}
