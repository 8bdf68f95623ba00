//go:build linux

package supervise

import (
	"os"
	"syscall"
	"time"
)

// reapLeftovers is the reaper's last duty after the aggregator died: kill
// everything in the run's cgroups, and every process that carries a tag of
// the run, wherever it was re-parented. A process may fork while it is
// being killed, so the scan repeats until it finds nothing (bounded).
func reapLeftovers(cgroupDir, runID string) {
	if cgroupDir != "" {
		killCgroup(cgroupDir)
	}
	if runID != "" {
		self := os.Getpid()
		for pass := 0; pass < 100; pass++ {
			found := 0
			for _, e := range procTable() {
				if e.live() && e.pid != self && hasRunTag(envTags(e.pid), runID) {
					signalVerified(e, syscall.SIGKILL)
					found++
				}
			}
			if found == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond) // let the killed die before looking again
		}
	}
	if cgroupDir != "" {
		removeCgroupTree(cgroupDir)
	}
}
