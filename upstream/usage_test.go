//go:build linux

package upstream

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUsagesReadsTheProcessTableOnce: a status page or a metrics scrape
// measures every instance; each pass over /proc reads the stat file of
// every process on the machine, so measuring them all costs one pass, not
// one per instance. The figures are those Usage gives each instance.
func TestUsagesReadsTheProcessTableOnce(t *testing.T) {
	sup := NewSupervisor(SupervisorOptions{Logger: newLogRecorder().logger(), Reaper: []string{os.Args[0], reaperArg}})
	t.Cleanup(func() { _ = sup.Close() })
	const n = 6
	insts := make([]*Instance, 0, n)
	for range n {
		insts = append(insts, startDemo(t, "daemon", withSupervisor(sup, newLogRecorder())))
	}
	for _, inst := range insts {
		daemonPIDs(t, inst) // its daemon runs
	}
	before := procTableReads.Load()
	got := Usages(insts)
	// A pass made meanwhile by the reaping of an unrelated child is
	// tolerated; one pass per instance is not.
	assert.LessOrEqual(t, procTableReads.Load()-before, int64(2), "passes over /proc to measure %d instances", n)
	require.Len(t, got, n)
	for i, inst := range insts {
		want := inst.Usage()
		assert.Equal(t, want.Processes, got[i].Processes, "instance %d: the server and its daemon", i)
		assert.GreaterOrEqual(t, got[i].Processes, 2, "instance %d: the server and its daemon", i)
		assert.Greater(t, got[i].RSS, int64(1<<20), "instance %d holds at least a MiB", i)
	}
}
