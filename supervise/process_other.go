//go:build unix && !linux

package supervise

import (
	"errors"
	"os/exec"
	"syscall"
)

// Outside Linux there is no parent-death signal, no subreaper, no cgroup
// and no way to wait for a child without reaping it: process groups and
// the reaper process cover what they can, and the group's id is freed when
// the leader exits.

func groupAttr(*cgroupDir) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func (p *Process) watchExit() {
	defer close(p.exited)
	err := p.Reap()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		p.status = "exit status 0"
	case errors.As(err, &exitErr):
		p.status = exitErr.Error()
	default:
		p.status = "exited"
	}
}

// othersAlive: the leader is already reaped, so any member of the group is
// another process.
func (p *Process) othersAlive() bool { return syscall.Kill(-p.pgid, 0) == nil }

// signalOthers: without /proc, the group is all there is to signal.
func (p *Process) signalOthers(syscall.Signal) {}

// usage is not measured outside Linux.
func (p *Process) Usage() Usage { return Usage{} }

type procSnapshot struct{}

func newProcSnapshot() procSnapshot { return procSnapshot{} }

func (p *Process) usageIn(procSnapshot) Usage { return Usage{} }
