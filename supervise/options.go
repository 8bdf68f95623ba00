package supervise

import (
	"log/slog"
	"time"
)

// Supervision modes, as Supervisor.Mode reports them: how the processes an
// upstream starts are found, so that none outlives its instance.
const (
	// ModeCgroup: each instance has a cgroup v2 of its own (Linux, where
	// cgroup v2 is writable); nothing escapes it, and cgroup.kill ends it.
	ModeCgroup = "cgroup"
	// ModeSubreaper: the aggregator is a child subreaper (Linux), so orphans
	// re-parent to it, and each instance's processes carry its tag in their
	// environment; a daemon that left the process group is found by either.
	ModeSubreaper = "subreaper"
	// ModeProcessGroup: process groups and the reaper only (other systems).
	ModeProcessGroup = "process-group"
)

// Options configure a Supervisor.
type Options struct {
	Logger *slog.Logger
	// Reaper is the reaper process's command line (this binary's hidden
	// subcommand that calls RunReaper); empty: no reaper.
	Reaper []string
	// NoCgroups keeps to process groups and the subreaper even where
	// cgroup v2 is writable.
	NoCgroups bool
}

// Grace periods of the MCP shutdown sequence, for callers that set no
// others (tests shorten them): how long Stop waits for the server to exit
// after its stdin closed, and then after SIGTERM.
const (
	DefaultStdinGrace = 2 * time.Second
	DefaultTermGrace  = 2 * time.Second
)
