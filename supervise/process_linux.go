//go:build linux

package supervise

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func groupAttr(cg *cgroupDir) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cg != nil {
		attr.UseCgroupFD, attr.CgroupFD = true, cg.fd
	}
	return attr
}

// watchExit waits for the leader to exit without reaping it, so its pid
// (the group's id) stays reserved until reap.
func (p *Process) watchExit() {
	defer close(p.exited)
	if p.pollExit() {
		return
	}
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

// pollExit waits for the leader's exit through a pidfd in the runtime's
// poller, so that a running instance holds no thread blocked in waitid: a
// blocking wait each would keep as many threads as instances ever ran at
// once for the rest of the process's life. It reports false, having
// waited for nothing, where pidfds cannot be waited on so (before Linux
// 5.4).
func (p *Process) pollExit() bool {
	fd, err := unix.PidfdOpen(p.pgid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var info unix.Siginfo
	var werr error
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		for {
			info = unix.Siginfo{}
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
			if werr != unix.EINTR {
				break
			}
		}
		exited = werr == nil && (*childInfo)(unsafe.Pointer(&info)).Pid != 0
		// Done on an error too; waitid(P_PIDFD) unknown to the kernel is
		// told apart below.
		return werr != nil || exited
	})
	switch {
	case err != nil || werr == unix.EINVAL:
		return false
	case exited:
		p.status = exitStatus(&info)
	}
	return true
}

// othersAlive reports whether a process of the instance other than the
// zombie leader runs.
func (p *Process) othersAlive() bool {
	if p.cgroup != nil && p.cgroup.populated() {
		return true
	}
	return len(p.members()) > 0
}

// signalOthers sends sig to every live process of the instance, each
// through a pidfd, so that a pid freed and reused meanwhile is never hit.
func (p *Process) signalOthers(sig syscall.Signal) {
	for _, m := range p.members() {
		signalVerified(m, sig)
	}
}

// members lists the live processes of the instance: those in its cgroup
// or its process group, those carrying its tag, and whatever descends from
// any of them. Orphans among them that were re-parented to us are noted, so
// that they are reaped when they die.
func (p *Process) members() []procInfo { return p.membersIn(procTable()) }

// membersIn is members, found in table, a look at the process table taken
// by the caller.
func (p *Process) membersIn(table []procInfo) []procInfo {
	self := os.Getpid()
	in := map[int]bool{}
	inCgroup := map[int]bool{}
	if p.cgroup != nil {
		for _, pid := range p.cgroup.procs() {
			inCgroup[pid] = true
		}
	}
	for _, e := range table {
		if !e.live() || e.pid == self {
			continue
		}
		// Nothing leaves a cgroup, so in cgroup mode the tags need not be read.
		if e.pgrp == p.pgid || inCgroup[e.pid] || (p.cgroup == nil && p.tag != "" && hasTag(envTags(e.pid), p.tag)) {
			in[e.pid] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, e := range table {
			if !in[e.pid] && in[e.ppid] && e.live() && e.pid != self {
				in[e.pid], grew = true, true
			}
		}
	}
	p.knownMu.Lock()
	if p.known == nil {
		p.known = map[int]uint64{}
	}
	var out []procInfo
	for _, e := range table {
		start, known := p.known[e.pid]
		known = known && start == e.start
		switch {
		case !e.live():
			delete(p.known, e.pid)
		case in[e.pid] || known:
			p.known[e.pid] = e.start
			out = append(out, e)
		}
	}
	for pid, start := range p.known {
		if e, ok := readProc(pid); !ok || e.start != start || !e.live() {
			delete(p.known, pid)
		}
	}
	p.knownMu.Unlock()
	children.noteOrphans(out)
	return out
}

// Usage sums the resident memory of the processes; nothing is left of a
// Process whose leader was reaped.
func (p *Process) Usage() Usage { return p.usageIn(nil) }

// procSnapshot is one look at the process table, shared by the
// measurements of several instances.
type procSnapshot []procInfo

func newProcSnapshot() procSnapshot { return procTable() }

// usageIn is usage, measured in snap (nil: a fresh look).
func (p *Process) usageIn(snap procSnapshot) Usage {
	var u Usage
	if p.reaped.Load() {
		return u
	}
	if snap == nil {
		snap = procTable()
	}
	page := int64(os.Getpagesize())
	for _, m := range p.membersIn(snap) {
		u.Processes++
		u.RSS += m.rss * page
	}
	return u
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
