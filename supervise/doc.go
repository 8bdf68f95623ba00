// Package supervise sees to it that no process an upstream server starts
// outlives its instance or the aggregator. It starts a command as the
// leader of a process group of its own (in a cgroup of its own where cgroup
// v2 is writable, tagged and tracked as a child subreaper on Linux), stops
// it by the MCP shutdown sequence (stdin closed, grace, SIGTERM, grace,
// SIGKILL, reap) together with everything that descends from it, reaps the
// orphans re-parented to the aggregator, and keeps a separate reaper
// process (RunReaper) that kills what is left if the aggregator itself is
// killed. It knows nothing of MCP or JSON-RPC: the caller owns the pipes.
//
// A Supervisor (New) serves the whole aggregator; Supervisor.Start gives a
// Process, and Process.Stop ends it. Linux has all of this; other Unix
// systems have process groups and the reaper; elsewhere a command is
// started as it is and killed once the graces pass.
package supervise
