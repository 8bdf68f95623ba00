//go:build linux

package upstream

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// watchExit waits for the leader to exit without reaping it, so its pid
// (the group's id) stays reserved until reap.
func (p *process) watchExit() {
	defer close(p.exited)
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err == nil {
			p.status = exitStatus(&info)
		}
		return
	}
}

// othersAlive reports whether a group member other than the zombie leader runs.
func (p *process) othersAlive() bool { return liveMembers(p.pgid) > 0 }

// liveMembers counts the processes of a group that are not zombies.
func liveMembers(pgid int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 1 // cannot tell: assume someone is there
	}
	n := 0
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ..."; comm may hold spaces and parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 3 || string(fields[0]) == "Z" {
			continue
		}
		if g, err := strconv.Atoi(string(fields[2])); err == nil && g == pgid {
			n++
		}
	}
	return n
}

// childInfo is the SIGCHLD layout of siginfo_t on Linux, which
// unix.Siginfo keeps opaque.
type childInfo struct {
	Signo, Errno, Code, _ int32
	Pid                   int32
	UID                   uint32
	Status                int32
}

// exitStatus describes how a child exited, as os/exec words it.
func exitStatus(info *unix.Siginfo) string {
	ci := (*childInfo)(unsafe.Pointer(info))
	switch ci.Code {
	case 1: // CLD_EXITED
		return fmt.Sprintf("exit status %d", ci.Status)
	case 2, 3: // CLD_KILLED, CLD_DUMPED
		return "signal: " + unix.SignalName(syscall.Signal(ci.Status))
	default:
		return "exited"
	}
}
