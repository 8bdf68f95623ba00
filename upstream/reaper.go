package upstream

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// A parent-death signal reaches only the direct child, so when the
// aggregator is killed outright the grandchildren of wrappers such as npx,
// uvx or sh would live on. The reaper closes that gap: a small process of
// our own binary, in its own process group, that holds the read end of a
// pipe. The aggregator writes "+PGID" when it starts an upstream and "-PGID"
// when that upstream is gone. However the aggregator ends — exit, panic,
// SIGKILL — the kernel closes the pipe, the reaper reads EOF, and it kills
// every group still registered.

// Reaper is the aggregator's side of the reaper process.
type Reaper struct {
	mu  sync.Mutex
	w   io.WriteCloser
	cmd *exec.Cmd
}

// StartReaper starts the reaper as `exe args...` (the hidden subcommand that
// calls RunReaper).
func StartReaper(exe string, args ...string) (*Reaper, error) {
	cmd := exec.Command(exe, args...)
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	// Its own group, so a terminal's Ctrl-C aimed at the aggregator's group
	// does not take the reaper down before it has done its job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return &Reaper{w: w, cmd: cmd}, nil
}

func (r *Reaper) send(op byte, pgid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		_, _ = fmt.Fprintf(r.w, "%c%d\n", op, pgid)
	}
}

// Track registers a process group to kill if the aggregator dies.
func (r *Reaper) Track(pgid int) { r.send('+', pgid) }

// Untrack removes a process group that is gone.
func (r *Reaper) Untrack(pgid int) { r.send('-', pgid) }

// PID is the reaper's process id.
func (r *Reaper) PID() int { return r.cmd.Process.Pid }

// Close ends the reaper; it kills whatever is still registered.
func (r *Reaper) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return nil
	}
	err := r.w.Close()
	r.w = nil
	return err
}

// RunReaper is the reaper process: it reads registrations from in until
// EOF, then SIGKILLs every group still registered.
func RunReaper(in io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
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
}
