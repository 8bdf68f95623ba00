//go:build unix && !linux

package upstream

import (
	"errors"
	"os/exec"
	"syscall"
)

// Outside Linux there is no parent-death signal and no way to wait for a
// child without reaping it: the reaper process alone covers the
// aggregator's death, and the group's id is freed when the leader exits.

func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func (p *process) watchExit() {
	defer close(p.exited)
	err := p.reap()
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

// othersAlive: the leader is already reaped, so any member is another process.
func (p *process) othersAlive() bool { return true }
