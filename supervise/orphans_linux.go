//go:build linux

package supervise

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// As a child subreaper the aggregator inherits every orphan of its
// upstreams: a daemon whose parent exited is re-parented to us rather than
// to init. Someone has to reap those orphans when they die, and that someone
// must never reap a child whose exit status belongs to an exec.Cmd's Wait.
// childTable tells the two apart. It is process-wide, as the things it
// describes are: children, SIGCHLD and the subreaper role belong to the
// process, not to one Supervisor.
var children = &childTable{spawned: map[int]bool{}, groups: map[int]bool{}, seen: map[int]uint64{}}

type childTable struct {
	mu      sync.Mutex
	spawned map[int]bool   // children we forked and have not reaped: their exit status is their Wait's
	groups  map[int]bool   // process groups led by such children: the upstreams'
	seen    map[int]uint64 // orphans seen alive as our children (pid -> start time)
	reaping bool           // the SIGCHLD loop runs
}

// start starts cmd and records its pid before any SIGCHLD of it can be
// looked at.
func (c *childTable) start(cmd *exec.Cmd) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	c.spawned[pid] = true
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		c.groups[pid] = true
	}
	return nil
}

// reaped forgets a child of ours whose Wait returned.
func (c *childTable) reaped(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.spawned, pid)
	delete(c.groups, pid)
}

// noteOrphans remembers the live processes of procs that are our children
// without being spawned by us: orphans an upstream left, which we reap once
// they die.
func (c *childTable) noteOrphans(procs []procInfo) {
	self := os.Getpid()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range procs {
		if e.ppid == self && !c.spawned[e.pid] {
			c.seen[e.pid] = e.start
		}
	}
}

// reapOrphans starts reaping orphans whenever a child of ours dies, once
// per process.
func (c *childTable) reapOrphans() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaping {
		return
	}
	c.reaping = true
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	go func() {
		for range sigchld {
			c.sweep()
		}
	}()
}

// sweep reaps every dead orphan of an upstream among our children. A dead
// child counts as such an orphan when we did not fork it and it is known to
// be an upstream's: it was seen alive as one, it is in an upstream's process
// group, or it is outside our own process group (a daemon that called
// setsid() or setpgid(), or a descendant of one), which a child this
// process forked elsewhere does not leave unless asked to. Code of this
// process that forks with exec.Cmd outside this package and puts the child
// in a new process group or session must not run beside a Supervisor.
func (c *childTable) sweep() {
	self := os.Getpid()
	ourSession, _ := unix.Getsid(0)
	ourGroup := unix.Getpgrp()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range procTable() {
		if e.ppid != self || e.live() || c.spawned[e.pid] {
			continue
		}
		start, seen := c.seen[e.pid]
		if (seen && start == e.start) || c.groups[e.pgrp] || e.pgrp != ourGroup || e.sid != ourSession {
			var status unix.WaitStatus
			_, _ = unix.Wait4(e.pid, &status, unix.WNOHANG, nil)
			delete(c.seen, e.pid)
		}
	}
}

// becomeSubreaper makes this process the one that inherits the orphans of
// its descendants (PR_SET_CHILD_SUBREAPER).
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	children.reapOrphans()
	return nil
}
