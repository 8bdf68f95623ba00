//go:build linux

package supervise

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// procTableReads counts the passes over /proc, each of which reads every
// process's stat file.
var procTableReads atomic.Int64

// procInfo is one process as /proc/PID/stat describes it.
type procInfo struct {
	pid, ppid, pgrp, sid int
	state                byte
	// start is the process's start time in clock ticks after boot: a pid
	// names one process only together with it.
	start uint64
	rss   int64 // resident pages
}

// live reports whether the process still runs (a zombie no longer does).
func (e procInfo) live() bool { return e.state != 'Z' && e.state != 'X' }

// readProc reads one process's stat; ok is false once it is gone.
func readProc(pid int) (procInfo, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(pid, stat)
}

// parseStat reads "pid (comm) state ppid pgrp session ...". comm may hold
// spaces and parentheses, so the fields are counted from the last ')'.
func parseStat(pid int, stat []byte) (procInfo, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(stat[i+1:])
	// After comm: state(0) ppid(1) pgrp(2) session(3) ... starttime(19) vsize(20) rss(21).
	if len(f) < 22 || len(f[0]) == 0 {
		return procInfo{}, false
	}
	e := procInfo{pid: pid, state: f[0][0]}
	e.ppid, _ = strconv.Atoi(string(f[1]))
	e.pgrp, _ = strconv.Atoi(string(f[2]))
	e.sid, _ = strconv.Atoi(string(f[3]))
	e.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	e.rss, _ = strconv.ParseInt(string(f[21]), 10, 64)
	return e, true
}

// procTable lists every process of the system that /proc shows us.
func procTable() []procInfo {
	procTableReads.Add(1)
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	table := make([]procInfo, 0, len(names))
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if e, ok := readProc(pid); ok {
			table = append(table, e)
		}
	}
	return table
}

// envTags returns the instance tags in pid's environment (see tagVar), or
// nil when it has none or cannot be read.
func envTags(pid int) []string {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil
	}
	prefix := []byte(tagVar + "=")
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return strings.Split(string(kv[len(prefix):]), ",")
		}
	}
	return nil
}

// signalVerified sends sig to the process e describes, and to no other:
// the pidfd pins the process, and its start time proves that it is still
// the one that was listed, not a newcomer that got its pid.
func signalVerified(e procInfo, sig syscall.Signal) {
	fd, err := unix.PidfdOpen(e.pid, 0)
	if err != nil {
		if err == unix.ENOSYS { // before Linux 5.3: check, then signal by pid
			if cur, ok := readProc(e.pid); ok && cur.start == e.start {
				_ = syscall.Kill(e.pid, sig)
			}
		}
		return
	}
	defer unix.Close(fd)
	if cur, ok := readProc(e.pid); !ok || cur.start != e.start {
		return
	}
	_ = unix.PidfdSendSignal(fd, sig, nil, 0)
}

// selfStart is this process's start time, for the run id.
func selfStart() uint64 {
	e, _ := readProc(os.Getpid())
	return e.start
}

// processStarted reports whether pid is a live process that started at start.
func processStarted(pid int, start uint64) bool {
	e, ok := readProc(pid)
	return ok && e.live() && e.start == start
}
