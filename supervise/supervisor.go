//go:build unix

package supervise

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
)

// tagVar is the environment variable that marks every process of an
// instance with the instance's tag, "<run id>:<n>". A nested aggregator's
// upstreams carry the outer tags too, comma-separated.
const tagVar = "MCP_AGGREGATOR_UPSTREAM"

// Supervisor sees to it that no process an upstream starts outlives its
// instance, nor the aggregator. It makes the aggregator a child subreaper,
// gives each instance a cgroup of its own where cgroup v2 is writable, tags
// each instance's processes, and keeps a reaper process that kills whatever
// is left if the aggregator itself is killed, restarting that reaper if it
// dies. One Supervisor serves the whole aggregator; instances started
// without one get process groups only.
type Supervisor struct {
	log       *slog.Logger
	id        string // this run, unique on the machine: "<pid>.<start time>.<random>"
	seq       atomic.Int64
	subreaper bool                       // orphans re-parent to this process
	cgroups   atomic.Pointer[cgroupTree] // nil outside cgroup mode
	reaper    *reaper
}

// New sets up process supervision, as far as the system allows,
// and logs which mode it runs in. It never fails: what is not available is
// logged, and the rest still works.
func New(opts Options) *Supervisor {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Supervisor{log: log, id: newRunID()}
	if err := becomeSubreaper(); err != nil {
		log.Info("not a child subreaper; daemons that upstreams start are found by process group only", "why", err)
	} else {
		s.subreaper = true
	}
	if !opts.NoCgroups {
		if tree, err := newCgroupTree(s.id, log); err != nil {
			log.Info("no cgroup for each upstream instance: "+cgroupFallback(s.subreaper), "why", err)
		} else {
			s.cgroups.Store(tree)
		}
	}
	if len(opts.Reaper) > 0 {
		r, err := startReaper(log, opts.Reaper...)
		if err != nil {
			log.Warn("no reaper: upstream processes may outlive a killed aggregator", "err", err)
		} else {
			s.reaper = r
			r.note(reaperRun, s.id)
			if tree := s.cgroups.Load(); tree != nil {
				r.note(reaperCgroup, tree.dir)
			}
		}
	}
	attrs := []any{"mode", s.Mode()}
	if tree := s.cgroups.Load(); tree != nil {
		attrs = append(attrs, "cgroup", tree.dir)
	}
	if s.reaper != nil {
		attrs = append(attrs, "reaper", s.reaper.PID())
	}
	log.Info("process supervision", attrs...)
	return s
}

func cgroupFallback(subreaper bool) string {
	if subreaper {
		return "tracking upstream processes as a subreaper"
	}
	return "tracking upstream processes by process group"
}

// Mode says how instances' processes are tracked: ModeCgroup,
// ModeSubreaper or ModeProcessGroup ("" for a nil Supervisor, which is
// process groups without a reaper).
func (s *Supervisor) Mode() string {
	switch {
	case s == nil:
		return ""
	case s.cgroups.Load() != nil:
		return ModeCgroup
	case s.subreaper:
		return ModeSubreaper
	default:
		return ModeProcessGroup
	}
}

// reaperPID is the pid of the current reaper process, 0 without one.
func (s *Supervisor) reaperPID() int {
	if s == nil || s.reaper == nil {
		return 0
	}
	return s.reaper.PID()
}

// Close ends supervision once every instance is closed: what is left in the
// cgroups is killed, and the reaper is told to finish.
func (s *Supervisor) Close() error {
	if s == nil {
		return nil
	}
	if tree := s.cgroups.Load(); tree != nil {
		tree.close()
	}
	return s.reaper.Close()
}

// Start starts cmd as a new instance of server (a name for the log and the
// cgroup): the leader of a process group of its own, with a parent-death
// signal on Linux, with the instance's tag in its environment, in cgroup
// mode in a cgroup of its own from its first instruction on, and
// registered with the reaper. It sets cmd.SysProcAttr. A nil Supervisor
// starts cmd in a process group of its own, and no more.
func (s *Supervisor) Start(server string, cmd *exec.Cmd) (*Process, error) {
	if s == nil {
		cmd.SysProcAttr = groupAttr(nil)
		if err := spawn(cmd); err != nil {
			return nil, err
		}
		return newProcess(cmd, nil, "", nil), nil
	}
	n := s.seq.Add(1)
	tag := s.id + ":" + strconv.FormatInt(n, 10)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = withTag(cmd.Env, tag)
	var cg *cgroupDir
	if tree := s.cgroups.Load(); tree != nil {
		var err error
		if cg, err = tree.create(strconv.FormatInt(n, 10) + "-" + cgroupName(server)); err != nil {
			s.log.Warn("no cgroup for this instance; tracking it as a subreaper", "server", server, "err", err)
		}
	}
	cmd.SysProcAttr = groupAttr(cg)
	err := spawn(cmd)
	if cg != nil {
		cg.started()
	}
	if err != nil {
		if cg != nil {
			cg.remove()
			// The probe passed, yet this clone into a cgroup failed: the
			// next instances start without cgroups rather than fail too.
			if s.cgroups.Swap(nil) != nil {
				s.log.Warn("starting into a cgroup failed; later instances are tracked as a subreaper", "server", server, "err", err)
			}
		}
		return nil, err
	}
	s.reaper.Track(cmd.Process.Pid)
	return newProcess(cmd, s, tag, cg), nil
}

// forget tells the reaper that an instance's group is gone.
func (s *Supervisor) forget(pgid int) { s.reaper.Untrack(pgid) }

// withTag adds tag to the instance tags in env. Tags this aggregator's
// own environment carries (it is an upstream of another aggregator) come
// first, so that the outer aggregator still knows the process as its own.
func withTag(env []string, tag string) []string {
	prefix := tagVar + "="
	outer := os.Getenv(tagVar)
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, prefix); ok {
			outer = v
			continue
		}
		out = append(out, kv)
	}
	if outer != "" {
		tag = outer + "," + tag
	}
	return append(out, prefix+tag)
}

// hasTag reports whether tags holds tag.
func hasTag(tags []string, tag string) bool {
	for _, t := range tags {
		if t == tag {
			return true
		}
	}
	return false
}

// hasRunTag reports whether tags holds a tag of the run runID.
func hasRunTag(tags []string, runID string) bool {
	for _, t := range tags {
		if strings.HasPrefix(t, runID+":") {
			return true
		}
	}
	return false
}

// cgroupName makes a server id safe as a directory name.
func cgroupName(server string) string {
	b := []byte(server)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// newRunID names this aggregator run: its pid and start time (which
// together name one process, so a stale run can be recognised), and random
// bits (so several supervisors in one process differ).
func newRunID() string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%d.%d.%s", os.Getpid(), selfStart(), hex.EncodeToString(r[:]))
}

// parseRunID reads the pid and start time back from a run id.
func parseRunID(id string) (pid int, start uint64, ok bool) {
	f := strings.Split(id, ".")
	if len(f) != 3 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	return pid, start, err1 == nil && err2 == nil && pid > 0
}
