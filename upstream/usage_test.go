//go:build linux

package upstream

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

// TestUsagesMeasuresEveryInstance: a status page or a metrics scrape
// measures every instance at once (from one pass over /proc: see
// supervise.TestUsagesReadsTheProcessTableOnce), and the figures are those
// Usage gives each instance.
func TestUsagesMeasuresEveryInstance(t *testing.T) {
	sup := supervise.New(supervise.Options{Logger: newLogRecorder().Logger(), Reaper: []string{os.Args[0], reaperArg}})
	t.Cleanup(func() { _ = sup.Close() })
	const n = 6
	insts := make([]*Instance, 0, n)
	for range n {
		insts = append(insts, startDemo(t, "daemon", withSupervisor(sup, newLogRecorder())))
	}
	for _, inst := range insts {
		daemonPIDs(t, inst) // its daemon runs
	}
	got := Usages(insts)
	require.Len(t, got, n)
	for i, inst := range insts {
		want := inst.Usage()
		assert.Equal(t, want.Processes, got[i].Processes, "instance %d: the server and its daemon", i)
		assert.GreaterOrEqual(t, got[i].Processes, 2, "instance %d: the server and its daemon", i)
		assert.Greater(t, got[i].RSS, int64(1<<20), "instance %d holds at least a MiB", i)
	}
}
