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
