package upstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Grace periods of the shutdown sequence (SPEC §7), unless Options set
// others (tests shorten them).
const (
	defaultStdinGrace = 2 * time.Second
	defaultTermGrace  = 2 * time.Second
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

// workDirError explains why dir cannot be a process's working directory, or
// returns nil when it can (or when dir is empty: the aggregator's own).
func workDirError(dir string) error {
	if dir == "" {
		return nil
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("working directory (cwd) %q does not exist; create it or fix cwd in the config: %w", dir, err)
	case err != nil:
		return fmt.Errorf("working directory (cwd) %q cannot be used; fix cwd in the config or the directory's permissions: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("working directory (cwd) %q is not a directory; set cwd to the directory the server should run in: %w",
			dir, &fs.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR})
	}
	return nil
}

// process is a started upstream and everything that descends from it: its
// process group, and under a Supervisor also the processes that left the
// group (a daemon that called setsid()), found by its cgroup or its tag.
//
// The leader is reaped only after everything is gone: while it is an
// unreaped zombie its pid, which is the group's id, cannot be handed to a
// new process, so signalling the group can never hit a stranger's processes.
type process struct {
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

func newProcess(cmd *exec.Cmd, sup *Supervisor, tag string, cg *cgroupDir) *process {
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, tag: tag, cgroup: cg, sup: sup, exited: make(chan struct{})}
	go p.watchExit()
	return p
}

// reap collects the leader's exit status; call it once the group is gone.
func (p *process) reap() error {
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
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pgid, sig)
}

// alive reports whether anything of the instance other than a zombie
// leader still runs.
func (p *process) alive() bool {
	select {
	case <-p.exited:
	default:
		return true // the leader itself
	}
	return p.othersAlive()
}

// signalAll sends sig to the group and to every process that descends from
// the instance.
func (p *process) signalAll(sig syscall.Signal) {
	p.signalGroup(sig)
	p.signalOthers(sig)
}

// stop runs the shutdown sequence for stdio servers: the caller has already
// closed stdin; give the server stdinGrace to exit on its own, then SIGTERM
// (and SIGCONT) everything of the instance, then SIGKILL it, then reap.
// Whatever the leader did, stragglers (grandchildren of wrappers such as npx
// or sh, daemons that left the group) are terminated the same way, so
// nothing outlives the instance.
func (p *process) stop(stdinGrace, termGrace time.Duration) {
	defer p.release()
	defer p.reap()
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
func (p *process) kill() {
	if p.cgroup != nil {
		p.cgroup.kill()
	}
	p.signalAll(syscall.SIGKILL)
}

// waitGone waits up to limit for the instance's processes to end, killing
// again whatever a dying process forked meanwhile once SIGKILL was sent.
// Processes outside our own children give no event to wait on, so this
// polls.
func (p *process) waitGone(limit time.Duration) bool {
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
func (p *process) release() {
	if p.cgroup != nil {
		p.cgroup.remove()
	}
	if p.sup != nil {
		p.sup.forget(p.pgid)
	}
}
