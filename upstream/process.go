package upstream

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Grace periods of the shutdown sequence (SPEC §7). Variables rather than
// constants so tests can shorten them through Options.
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

// startInGroup starts cmd as the leader of a new process group that receives
// SIGKILL if the thread that started it (and so the aggregator) dies.
func startInGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	done := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// process is a started child and its group.
type process struct {
	cmd    *exec.Cmd
	pgid   int
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, valid after exited
}

func newProcess(cmd *exec.Cmd) *process {
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// signalGroup sends sig to every process of the group; a group that is
// already gone is not an error.
func (p *process) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-p.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Signal(sig)
	}
}

// groupAlive reports whether any process of the group still exists.
func (p *process) groupAlive() bool {
	return syscall.Kill(-p.pgid, 0) == nil
}

// stop runs the shutdown sequence for stdio servers: the caller has already
// closed stdin; give the server stdinGrace to exit on its own, then SIGTERM
// the whole group, then SIGKILL it, then reap. Whatever the leader did,
// stragglers in its group (grandchildren of wrappers such as npx or sh) are
// terminated the same way, so nothing outlives the instance.
func (p *process) stop(stdinGrace, termGrace time.Duration) {
	select {
	case <-p.exited:
	case <-time.After(stdinGrace):
	}
	if !p.groupAlive() {
		<-p.exited
		return
	}
	p.signalGroup(syscall.SIGTERM)
	deadline := time.NewTimer(termGrace)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.groupAlive() {
		select {
		case <-deadline.C:
			p.signalGroup(syscall.SIGKILL)
			<-p.exited
			return
		case <-tick.C:
		}
	}
	<-p.exited
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
