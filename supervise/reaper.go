//go:build unix

package supervise

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/memtrim"
)

// A parent-death signal reaches only the direct child, so when the
// aggregator is killed outright the grandchildren of wrappers such as npx,
// uvx or sh, and daemons that left the group, would live on. The reaper
// closes that gap: a small process of our own binary, in its own process
// group, that holds the read end of a pipe. The aggregator tells it, one
// line each:
//
//	+PGID   an upstream's process group to kill
//	-PGID   that group is gone
//	=RUN    the run id: kill every process tagged with it (Linux)
//	@DIR    the run's cgroup directory: cgroup.kill it and remove it (Linux)
//
// However the aggregator ends (exit, panic, SIGKILL) the kernel closes the
// pipe, the reaper reads EOF, and it kills everything still registered. The
// aggregator notices when the reaper dies and starts another, which it
// tells everything again.

// Reaper lines that describe the run rather than one group.
const (
	reaperRun    = '='
	reaperCgroup = '@'
)

// reaper is the aggregator's side of the reaper process.
type reaper struct {
	log  *slog.Logger
	argv []string

	mu     sync.Mutex
	cmd    *exec.Cmd      // the current reaper process
	w      io.WriteCloser // its stdin; nil while there is no live reaper
	groups map[int]bool
	notes  []string // run lines every new reaper is told first
	closed bool
	done   chan struct{} // closed by Close: no more restarts
}

// reaperRestartMax bounds the wait between attempts to restart a reaper
// that cannot be started.
const reaperRestartMax = 30 * time.Second

// startReaper starts the reaper as argv (the hidden subcommand that calls
// RunReaper) and restarts it whenever it dies until Close.
func startReaper(log *slog.Logger, argv ...string) (*reaper, error) {
	if log == nil {
		log = slog.Default()
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("start reaper: no command")
	}
	r := &reaper{log: log, argv: argv, groups: map[int]bool{}, done: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.launch(); err != nil {
		return nil, err
	}
	return r, nil
}

// launch starts a reaper process and tells it everything it must know.
// Callers hold mu.
func (r *reaper) launch() error {
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	// Its own group, so a terminal's Ctrl-C aimed at the aggregator's group
	// does not take the reaper down before it has done its job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("start reaper: %w", err)
	}
	var lines []byte
	for _, n := range r.notes {
		lines = append(lines, n...)
	}
	for pgid := range r.groups {
		lines = fmt.Appendf(lines, "+%d\n", pgid)
	}
	_, _ = w.Write(lines)
	r.cmd, r.w = cmd, w
	go r.watch(cmd, time.Now())
	return nil
}

// watch waits for a reaper process to end; unless Close ended it, it
// starts another.
func (r *reaper) watch(cmd *exec.Cmd, started time.Time) {
	err := cmd.Wait()
	children.reaped(cmd.Process.Pid)
	r.mu.Lock()
	if r.closed || r.cmd != cmd {
		r.mu.Unlock()
		return
	}
	_ = r.w.Close()
	r.w = nil
	r.mu.Unlock()
	r.log.Warn("the reaper process died; restarting it", "pid", cmd.Process.Pid, "status", exitText(err))
	var delay time.Duration
	if time.Since(started) < time.Second {
		delay = time.Second // one that dies at once is not restarted in a tight loop
	}
	r.restart(delay)
}

// restart starts a new reaper after delay, retrying with backoff while
// that fails. The aggregator serves on meanwhile: a missing reaper only
// matters if the aggregator is killed.
func (r *reaper) restart(delay time.Duration) {
	for {
		if delay > 0 {
			select {
			case <-r.done:
				return
			case <-time.After(delay):
			}
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return
		}
		err := r.launch()
		pid := 0
		if err == nil {
			pid = r.cmd.Process.Pid
		}
		r.mu.Unlock()
		if err == nil {
			r.log.Info("reaper restarted", "pid", pid)
			return
		}
		delay = min(max(2*delay, 100*time.Millisecond), reaperRestartMax)
		r.log.Error("cannot restart the reaper; upstream processes may outlive this aggregator if it is killed; still serving, and retrying",
			"err", err, "retry_in", delay)
	}
}

// send records a line for later reapers and writes it to the current one.
func (r *reaper) send(line string) {
	if r.w != nil {
		_, _ = io.WriteString(r.w, line)
	}
}

// note tells every reaper, now and after restarts, something about the run.
func (r *reaper) note(kind byte, value string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	line := string(kind) + value + "\n"
	r.notes = append(r.notes, line)
	r.send(line)
}

// Track registers a process group to kill if the aggregator dies.
func (r *reaper) Track(pgid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups[pgid] = true
	r.send("+" + strconv.Itoa(pgid) + "\n")
}

// Untrack removes a process group that is gone.
func (r *reaper) Untrack(pgid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, pgid)
	r.send("-" + strconv.Itoa(pgid) + "\n")
}

// PID is the current reaper process's id.
func (r *reaper) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process.Pid
}

// Close ends the reaper; it kills whatever is still registered.
func (r *reaper) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	close(r.done)
	if r.w == nil {
		return nil
	}
	err := r.w.Close()
	r.w = nil
	return err
}

// RunReaper is the reaper process, the whole of the hidden subcommand that
// Options.Reaper names: it reads registrations from in (its stdin, the
// aggregator's end of the pipe) until EOF, then kills every group still
// registered, and on Linux everything in the run's cgroups or tagged with
// its run id.
func RunReaper(in io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	slimReaper()
	groups := map[int]bool{}
	var runID, cgroupDir string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		switch line[0] {
		case reaperRun:
			runID = line[1:]
			continue
		case reaperCgroup:
			cgroupDir = line[1:]
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	reapLeftovers(cgroupDir, runID)
}

// slimReaper makes the reaper, which spends its life blocked on a read,
// as small as it can be after the binary's initialisation: one processor,
// the heap the initialisation left behind returned to the system, and the
// binary's pages it touched dropped from its resident set. The collector
// then runs only when the heap nears reaperMemoryLimit: each cycle reads
// the type information of every object the initialisation left, pages of
// the binary that would come back into the resident set, while the reaper
// itself allocates a few bytes per line it reads.
func slimReaper() {
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(reaperMemoryLimit)
	memtrim.Trim()
}

// reaperMemoryLimit is the reaper's memory goal: about twice what the
// binary's initialisation leaves, which a reaper reaches after some
// hundred thousand lines.
const reaperMemoryLimit = 12 << 20

// exitText words how a process ended, from its Wait's error.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
