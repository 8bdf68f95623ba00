package upstream

// Usage is what an instance's processes hold at one moment.
type Usage struct {
	Processes int   // live processes: the server and everything it started
	RSS       int64 // their resident memory, in bytes
}

// Usage measures the processes of a stdio instance: the server and every
// process that descends from it. It reads /proc, so it is zero outside
// Linux, and for remote instances, which have no process of ours.
func (i *Instance) Usage() Usage {
	switch c := i.conn.(type) {
	case *stdioConn:
		return c.proc.usage()
	case *modernStdio:
		return c.proc.usage()
	}
	return Usage{}
}

// Usages measures every instance of insts, as Usage does, from one look at
// the process table rather than one each: a status page or a scrape costs
// one pass over /proc however many instances run.
func Usages(insts []*Instance) []Usage {
	out := make([]Usage, len(insts))
	var snap procSnapshot
	taken := false
	for i, inst := range insts {
		var proc *process
		switch c := inst.conn.(type) {
		case *stdioConn:
			proc = c.proc
		case *modernStdio:
			proc = c.proc
		}
		if proc == nil {
			continue
		}
		if !taken {
			snap, taken = newProcSnapshot(), true
		}
		out[i] = proc.usageIn(snap)
	}
	return out
}
