package upstream

import "github.com/mcp-aggregator/mcp-aggregator/supervise"

// Usage is what an instance's processes hold at one moment.
type Usage = supervise.Usage

// Usage measures the processes of a stdio instance: the server and every
// process that descends from it. It reads /proc, so it is zero outside
// Linux, and for remote instances, which have no process of ours.
func (i *Instance) Usage() Usage {
	if proc := i.process(); proc != nil {
		return proc.Usage()
	}
	return Usage{}
}

// Usages measures every instance of insts, as Usage does, from one look at
// the process table rather than one each: a status page or a scrape costs
// one pass over /proc however many instances run.
func Usages(insts []*Instance) []Usage {
	procs := make([]*supervise.Process, len(insts))
	for i, inst := range insts {
		procs[i] = inst.process()
	}
	return supervise.Usages(procs)
}

// process is the supervised process of a stdio instance, nil for remote
// ones.
func (i *Instance) process() *supervise.Process {
	switch c := i.conn.(type) {
	case *stdioConn:
		return c.proc
	case *modernStdio:
		return c.proc
	}
	return nil
}
