package upstream

import (
	"os"
	"os/exec"
	"runtime"
	"sync"
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
			req.done <- req.cmd.Start()
		}
	}()
}

// startInGroup starts cmd as the leader of a new process group that, on
// Linux, receives SIGKILL if the thread that started it (and so the
// aggregator) dies.
func startInGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = groupAttr()
	done := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// process is a started child and its group.
//
// The leader is reaped only after the whole group is gone: while it is an
// unreaped zombie its pid, which is the group's id, cannot be handed to a new
// process, so signalling the group can never hit a stranger's processes.
type process struct {
	cmd      *exec.Cmd
	pgid     int
	exited   chan struct{} // closed once the leader has exited (not yet reaped)
	status   string        // how the leader exited, valid after exited
	reapOnce sync.Once
	err      error // Wait's result, valid after reap
}

func newProcess(cmd *exec.Cmd) *process {
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, exited: make(chan struct{})}
	go p.watchExit()
	return p
}

// reap collects the leader's exit status; call it once the group is gone.
func (p *process) reap() error {
	p.reapOnce.Do(func() { p.err = p.cmd.Wait() })
	return p.err
}

// signalGroup sends sig to every process of the group.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pgid, sig)
}

// groupAlive reports whether any process of the group other than a zombie
// leader still runs.
func (p *process) groupAlive() bool {
	select {
	case <-p.exited:
	default:
		return true // the leader itself
	}
	if syscall.Kill(-p.pgid, 0) != nil {
		return false
	}
	return p.othersAlive()
}

// stop runs the shutdown sequence for stdio servers: the caller has already
// closed stdin; give the server stdinGrace to exit on its own, then SIGTERM
// (and SIGCONT) the whole group, then SIGKILL it, then reap. Whatever the leader did,
// stragglers in its group (grandchildren of wrappers such as npx or sh) are
// terminated the same way, so nothing outlives the instance.
func (p *process) stop(stdinGrace, termGrace time.Duration) {
	defer p.reap()
	select {
	case <-p.exited:
	case <-time.After(stdinGrace):
	}
	if !p.groupAlive() {
		return
	}
	p.signalGroup(syscall.SIGTERM)
	// A stopped process (SIGSTOP, a debugger, a full terminal) acts on
	// SIGTERM only once it runs again.
	p.signalGroup(syscall.SIGCONT)
	if p.waitGone(termGrace) {
		return
	}
	p.signalGroup(syscall.SIGKILL)
	p.waitGone(termGrace)
}

// waitGone waits up to limit for the group to end. Processes outside our
// own children give no event to wait on, so this polls.
func (p *process) waitGone(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for p.groupAlive() {
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

// environ overlays env on the host environment.
func environ(env map[string]string) []string {
	out := os.Environ()
	if len(env) == 0 {
		return out
	}
	kept := out[:0:0]
	for _, kv := range out {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if _, overridden := env[name]; !overridden {
			kept = append(kept, kv)
		}
	}
	for k, v := range env {
		kept = append(kept, k+"="+v)
	}
	return kept
}
