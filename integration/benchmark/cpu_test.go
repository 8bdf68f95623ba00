package benchmark

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpuTime is the CPU time process pid has used so far, all its threads together, read
// from the scheduler's nanosecond counters (the first field of
// /proc/PID/task/TID/schedstat). /proc/PID/stat has the same in clock ticks of 10 ms,
// too coarse for a few thousand calls of some microseconds each. A thread that exits
// between two readings takes its time with it; Go's runtime keeps its threads.
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no /proc/%d/task/*/schedstat", pid, pid)
	}
	var total time.Duration
	for _, path := range tasks {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		ns, err := parseSchedstat(data)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		total += ns
	}
	return total, nil
}

// parseSchedstat returns the time on CPU from a schedstat line: "ns-on-cpu ns-waiting slices".
func parseSchedstat(line []byte) (time.Duration, error) {
	fields := bytes.Fields(line)
	if len(fields) != 3 {
		return 0, fmt.Errorf("unexpected schedstat line %q", line)
	}
	ns, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(ns), nil
}

// childRunning returns the pid of a child of process parent that has arg among its
// arguments: the upstream a relay, a bridge or the aggregator started.
func childRunning(parent int, arg string) (int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process exited
		}
		pid, ppid, ok := parseStatPIDs(data)
		if !ok || ppid != parent {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if string(a) == arg {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("process %d has no child running with argument %q", parent, arg)
}

// parseStatPIDs returns the pid and the parent's pid from a /proc/PID/stat line,
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func parseStatPIDs(stat []byte) (pid, ppid int, ok bool) {
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 1 || end < open {
		return 0, 0, false
	}
	rest := bytes.Fields(stat[end+1:])
	if len(rest) < 2 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(string(bytes.TrimSpace(stat[:open])))
	ppid, err2 := strconv.Atoi(string(rest[1]))
	return pid, ppid, err1 == nil && err2 == nil
}

func TestParseStatPIDs(t *testing.T) {
	pid, ppid, ok := parseStatPIDs([]byte("4242 (a (b) c) S 17 4242 4242 0 -1 4194560\n"))
	assert.True(t, ok)
	assert.Equal(t, 4242, pid)
	assert.Equal(t, 17, ppid)
	_, _, ok = parseStatPIDs([]byte("garbage"))
	assert.False(t, ok)
}

func TestParseSchedstat(t *testing.T) {
	got, err := parseSchedstat([]byte("1038633064 71129367 257\n"))
	require.NoError(t, err)
	assert.Equal(t, 1038633064*time.Nanosecond, got)
	_, err = parseSchedstat([]byte("12 34\n"))
	assert.Error(t, err)
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, err := cpuTime(os.Getpid())
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Millisecond)
	for time.Now().Before(deadline) { // spin: CPU time must grow
	}
	after, err := cpuTime(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, after, before)
}

// ioCount is how many read and write system calls a process has made (the
// syscr and syscw lines of /proc/PID/io); a read that found nothing counts.
type ioCount struct{ reads, writes int64 }

func (a ioCount) sub(b ioCount) ioCount { return ioCount{a.reads - b.reads, a.writes - b.writes} }
func (a ioCount) add(b ioCount) ioCount { return ioCount{a.reads + b.reads, a.writes + b.writes} }

// processIO is pid's ioCount so far; zero for pid 0 (no such process on the route).
func processIO(b *testing.B, pid int) ioCount {
	if pid == 0 {
		return ioCount{}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		b.Fatalf("process %d: %v", pid, err)
	}
	var c ioCount
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		name, value, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			continue
		}
		switch string(name) {
		case "syscr":
			c.reads = n
		case "syscw":
			c.writes = n
		}
	}
	return c
}
