//go:build unix

package supervise

import (
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// spawnRequests carries commands to the one goroutine that starts processes.
// Linux delivers the parent-death signal when the *thread* that forked the
// child exits, not the process; Go may retire threads at will, so every child
// is forked from a goroutine locked to a thread that lives as long as we do.
var spawnRequests = make(chan spawnRequest)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		runtime.LockOSThread()
		for req := range spawnRequests {
			req.done <- children.start(req.cmd)
		}
	}()
}

// spawn starts cmd from the spawning thread and records it as a child this
// process forked itself (see children).
func spawn(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// Process is a started command and everything that descends from it: its
// process group, and under a Supervisor also the processes that left the
// group (a daemon that called setsid()), found by its cgroup or its tag.
// Supervisor.Start makes one; Stop ends it.
//
// The leader is reaped only after everything is gone: while it is an
// unreaped zombie its pid, which is the group's id, cannot be handed to a
// new process, so signalling the group can never hit a stranger's processes.
type Process struct {
	cmd      *exec.Cmd
	pgid     int
	tag      string     // this instance's mark in its processes' environment; "" without a Supervisor
	cgroup   *cgroupDir // the instance's own cgroup; nil outside cgroup mode
	sup      *Supervisor
	exited   chan struct{} // closed once the leader has exited (not yet reaped)
	status   string        // how the leader exited, valid after exited
	reapOnce sync.Once
	reaped   atomic.Bool // the leader was reaped: its group's id may name a stranger's group now
	err      error       // Wait's result, valid after reap

	// known holds every process once found to be the instance's (pid ->
	// start time). A dying process loses its environment before it is
	// gone, so it stays the instance's by being known, not by its tag.
	knownMu sync.Mutex
	known   map[int]uint64
}

func newProcess(cmd *exec.Cmd, sup *Supervisor, tag string, cg *cgroupDir) *Process {
	p := &Process{cmd: cmd, pgid: cmd.Process.Pid, tag: tag, cgroup: cg, sup: sup, exited: make(chan struct{})}
	go p.watchExit()
	return p
}

// PID is the leader's process id, which is also its process group's.
func (p *Process) PID() int { return p.pgid }

// Exited is closed once the leader has exited. The leader is not reaped
// yet then: its pid, and so its group's id, stays reserved until Reap.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitStatus says how the leader exited ("exit status 3", "signal:
// SIGKILL"), as os/exec words it; valid once Exited is closed.
func (p *Process) ExitStatus() string { return p.status }

// Reap collects the leader's exit status and returns what exec.Cmd.Wait
// returns; call it once the group is gone (Stop does). Later calls return
// the same.
func (p *Process) Reap() error {
	p.reapOnce.Do(func() {
		// Orphans of the group that died as our children go first, while
		// the group's id still marks them as the instance's.
		children.sweep()
		p.err = p.cmd.Wait()
		p.reaped.Store(true)
		children.reaped(p.pgid)
	})
	return p.err
}

// signalGroup sends sig to every process of the group.
func (p *Process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pgid, sig)
}

// alive reports whether anything of the instance other than a zombie
// leader still runs.
func (p *Process) alive() bool {
	select {
	case <-p.exited:
	default:
		return true // the leader itself
	}
	return p.othersAlive()
}

// signalAll sends sig to the group and to every process that descends from
// the instance.
func (p *Process) signalAll(sig syscall.Signal) {
	p.signalGroup(sig)
	p.signalOthers(sig)
}

// Stop runs the shutdown sequence for stdio servers: the caller has already
// closed stdin; give the server stdinGrace to exit on its own, then SIGTERM
// (and SIGCONT) everything of the instance, then SIGKILL it, then reap.
// Whatever the leader did, stragglers (grandchildren of wrappers such as npx
// or sh, daemons that left the group) are terminated the same way, so
// nothing outlives the instance.
func (p *Process) Stop(stdinGrace, termGrace time.Duration) {
	defer p.release()
	defer p.Reap()
	select {
	case <-p.exited:
	case <-time.After(stdinGrace):
	}
	if !p.alive() {
		return
	}
	p.signalAll(syscall.SIGTERM)
	// A stopped process (SIGSTOP, a debugger, a full terminal) acts on
	// SIGTERM only once it runs again.
	p.signalAll(syscall.SIGCONT)
	if p.waitGone(termGrace) {
		return
	}
	p.kill()
	p.waitGone(termGrace)
}

// kill SIGKILLs everything of the instance: the cgroup at once, the group,
// and each descendant found.
func (p *Process) kill() {
	if p.cgroup != nil {
		p.cgroup.kill()
	}
	p.signalAll(syscall.SIGKILL)
}

// waitGone waits up to limit for the instance's processes to end, killing
// again whatever a dying process forked meanwhile once SIGKILL was sent.
// Processes outside our own children give no event to wait on, so this
// polls.
func (p *Process) waitGone(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-p.exited:
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// release hands back what the instance held once it is gone: its cgroup,
// and its group's registration with the reaper.
func (p *Process) release() {
	if p.cgroup != nil {
		p.cgroup.remove()
	}
	if p.sup != nil {
		p.sup.forget(p.pgid)
	}
}
