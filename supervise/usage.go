package supervise

// Usage is what a Process holds at one moment.
type Usage struct {
	Processes int   // live processes: the leader and everything it started
	RSS       int64 // their resident memory, in bytes
}

// Usages measures every process of procs, as Process.Usage does, from one
// look at the process table rather than one each: a status page or a
// scrape costs one pass over /proc however many processes run. A nil entry
// measures zero.
func Usages(procs []*Process) []Usage {
	out := make([]Usage, len(procs))
	var snap procSnapshot
	taken := false
	for i, p := range procs {
		if p == nil {
			continue
		}
		if !taken {
			snap, taken = newProcSnapshot(), true
		}
		out[i] = p.usageIn(snap)
	}
	return out
}
