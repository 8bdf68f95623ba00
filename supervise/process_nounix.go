//go:build !unix

package supervise

import (
	"io"
	"os/exec"
	"sync"
	"time"
)

// Without Unix process groups there is nothing to supervise but the
// command itself: it starts as it is, Stop kills it once the graces have
// passed, and there is no reaper. The aggregator is built here so that it
// compiles; its stdio upstreams are only as contained as the system makes
// them.

// Supervisor stands in for process supervision; Mode is "".
type Supervisor struct{}

// New returns a Supervisor that supervises nothing beyond the command.
func New(Options) *Supervisor { return &Supervisor{} }

// Mode is "": no mode of supervision runs here.
func (s *Supervisor) Mode() string { return "" }

// Close has nothing to end.
func (s *Supervisor) Close() error { return nil }

// Start starts cmd.
func (s *Supervisor) Start(_ string, cmd *exec.Cmd) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if p.err == nil {
			p.status = "exit status 0"
		} else {
			p.status = p.err.Error()
		}
		close(p.exited)
	}()
	return p, nil
}

// Process is a started command.
type Process struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	status   string
	err      error
	stopOnce sync.Once
}

// PID is the command's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the command has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitStatus says how the command exited; valid once Exited is closed.
func (p *Process) ExitStatus() string { return p.status }

// Reap waits for the command to exit and returns what exec.Cmd.Wait
// returned.
func (p *Process) Reap() error {
	<-p.exited
	return p.err
}

// Stop gives the command stdinGrace and termGrace to exit after its stdin
// closed, then kills it.
func (p *Process) Stop(stdinGrace, termGrace time.Duration) {
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			return
		case <-time.After(stdinGrace + termGrace):
		}
		_ = p.cmd.Process.Kill()
	})
	<-p.exited
}

// Usage is not measured here.
func (p *Process) Usage() Usage { return Usage{} }

type procSnapshot struct{}

func newProcSnapshot() procSnapshot { return procSnapshot{} }

func (p *Process) usageIn(procSnapshot) Usage { return Usage{} }

// RunReaper has nothing to reap: it reads in until EOF.
func RunReaper(in io.Reader) { _, _ = io.Copy(io.Discard, in) }
