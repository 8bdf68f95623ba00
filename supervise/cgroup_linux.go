//go:build linux

package supervise

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Where cgroup v2 is writable, each stdio instance runs in a cgroup of its
// own, under one directory per aggregator run:
//
//	<the aggregator's cgroup>/mcp-aggregator-<run id>/<n>-<server id>
//
// A process cannot leave its cgroup by forking, setsid() or double forks,
// and writing "1" to cgroup.kill SIGKILLs everything in a cgroup and its
// children at once, including processes forked while it runs. That makes
// closing an instance, and the reaper's cleanup after the aggregator died,
// complete.

// cgroupPrefix starts the name of every run's directory.
const cgroupPrefix = "mcp-aggregator-"

// cgroupTree is one run's directory of instance cgroups.
type cgroupTree struct {
	dir string
}

// cgroupDir is one instance's cgroup.
type cgroupDir struct {
	path string
	fd   int // open while the instance is being started: clone3 places it here
}

// newCgroupTree creates this run's directory under the aggregator's own
// cgroup, after removing what dead runs left there, and checks that a
// process can be started into a cgroup below it.
func newCgroupTree(runID string, log *slog.Logger) (*cgroupTree, error) {
	parent, err := ownCgroupDir()
	if err != nil {
		return nil, err
	}
	sweepStaleCgroups(parent, log)
	dir := filepath.Join(parent, cgroupPrefix+runID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	t := &cgroupTree{dir: dir}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		t.close()
		return nil, fmt.Errorf("%s has no cgroup.kill (it needs Linux 5.14 or later)", dir)
	}
	if err := t.probe(); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// probe starts a process into a cgroup of the tree, the way instances are
// started (clone3 with CLONE_INTO_CGROUP), and checks that the clone
// worked. The process execs a path that does not exist, so it ends at once
// and runs nothing: ENOENT from the exec proves the clone succeeded.
func (t *cgroupTree) probe() error {
	cg, err := t.create("probe")
	if err != nil {
		return err
	}
	defer cg.remove()
	missing := filepath.Join(cg.path, "no-such-program")
	_, err = syscall.ForkExec(missing, []string{missing}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.fd},
	})
	cg.started()
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return fmt.Errorf("cannot start a process into a cgroup of %s: %v", t.dir, err)
}

// create makes a cgroup for one instance.
func (t *cgroupTree) create(name string) (*cgroupDir, error) {
	path := filepath.Join(t.dir, name)
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create cgroup %s: %w", path, err)
	}
	fd, err := unix.Open(path, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("cannot open cgroup %s: %w", path, err)
	}
	return &cgroupDir{path: path, fd: fd}, nil
}

// close kills whatever is left in the tree and removes it.
func (t *cgroupTree) close() { removeCgroupTree(t.dir) }

// started closes the descriptor the clone needed.
func (d *cgroupDir) started() {
	if d.fd >= 0 {
		_ = unix.Close(d.fd)
		d.fd = -1
	}
}

// kill SIGKILLs every process in the cgroup, at once.
func (d *cgroupDir) kill() { killCgroup(d.path) }

// populated reports whether a live process is in the cgroup.
func (d *cgroupDir) populated() bool { return cgroupPopulated(d.path) }

// procs lists the processes in the cgroup.
func (d *cgroupDir) procs() []int {
	data, err := os.ReadFile(filepath.Join(d.path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// remove deletes the cgroup, killing what is left in it first.
func (d *cgroupDir) remove() {
	d.started()
	removeCgroupTree(d.path)
}

func killCgroup(dir string) {
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
}

// cgroupPopulated reads "populated" from cgroup.events. A cgroup that cannot
// be read counts as empty: it is gone.
func cgroupPopulated(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "populated "); ok {
			return v != "0"
		}
	}
	return false
}

// removeCgroupTree kills everything in dir and below, waits (bounded) until
// it is empty, and removes the directories, deepest first.
func removeCgroupTree(dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	if cgroupPopulated(dir) {
		killCgroup(dir)
		deadline := time.Now().Add(5 * time.Second)
		for cgroupPopulated(dir) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // cgroup.events gives no event a goroutine can wait on cheaply
		}
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

// sweepStaleCgroups removes the directories of runs whose aggregator is
// gone (killed together with its reaper), killing what escaped them.
func sweepStaleCgroups(parent string, log *slog.Logger) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, start, ok := parseRunID(id)
		if !ok || processStarted(pid, start) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if cgroupPopulated(dir) {
			log.Warn("killing upstream processes an earlier aggregator run left behind", "cgroup", dir)
		}
		removeCgroupTree(dir)
	}
}

// ownCgroupDir finds this process's cgroup v2 directory.
func ownCgroupDir() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cannot read /proc/self/cgroup: %w", err)
	}
	var own string
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own, found = p, true
		}
	}
	if !found {
		return "", errors.New("this process is in no cgroup v2 hierarchy")
	}
	root, mountpoint, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	rel := own
	if root != "/" {
		var ok bool
		if rel, ok = strings.CutPrefix(own, root); !ok {
			return "", fmt.Errorf("the cgroup2 mount at %s does not show this process's cgroup %s", mountpoint, own)
		}
	}
	return filepath.Join(mountpoint, rel), nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid systems).
func cgroup2Mount() (root, mountpoint string, err error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("cannot read /proc/self/mountinfo: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		// "id parent major:minor root mountpoint options [optional...] - fstype source superoptions"
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		return unescapeMount(f[3]), unescapeMount(f[4]), nil
	}
	return "", "", errors.New("no cgroup2 file system is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
