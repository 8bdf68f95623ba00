//go:build unix

package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
)

// demoEnv names the demo server a child copy of this test binary serves
// ("daemon", "tools", ...).
const demoEnv = "MCPAGG_DEMO_SERVER"

// reaperArg makes a child copy of this test binary run RunReaper.
const reaperArg = "supervise-reaper"

// TestMain lets this test binary stand in for the processes a Supervisor
// starts: the reaper, and the demo servers, so that the tests below
// supervise real process trees. "demo-server NAME ARGS" is accepted too,
// because that is how the daemon server starts its daemon.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "demo-server" {
		if err := demo.Run(context.Background(), os.Args[2], os.Args[3:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	if len(os.Args) == 2 && os.Args[1] == reaperArg {
		RunReaper(os.Stdin)
		os.Exit(0)
	}
	if code, ran := demo.RunFromEnv(demoEnv); ran {
		os.Exit(code)
	}
	demo.QuietRaceExit()
	os.Exit(m.Run())
}

// waitTimeout bounds every wait; it is reached only when something is broken.
const waitTimeout = 20 * time.Second

// logRecorder is a slog handler that keeps every record as one line of text,
// so tests can wait for what a Supervisor logged.
type logRecorder struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (r *logRecorder) logger() *slog.Logger { return slog.New(r) }

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// waitFor returns the first recorded line that contains substr, waiting for it.
func (r *logRecorder) waitFor(t *testing.T, substr string) string {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		r.mu.Lock()
		changed := r.changed
		for _, l := range r.lines {
			if strings.Contains(l, substr) {
				r.mu.Unlock()
				return l
			}
		}
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no log line containing %q within %s", substr, waitTimeout)
		}
	}
}

// processExists reports whether pid is a live process. A zombie counts as
// gone: it runs nothing and only waits for its parent (or init) to reap it.
func processExists(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// requireGone waits until pid no longer exists.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return !processExists(pid) }, waitTimeout, 10*time.Millisecond,
		"process %d still exists", pid)
}

// requireReaped waits until pid is gone and reaped (kill -0 reports ESRCH),
// which is what a direct child of ours must reach.
func requireReaped(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}, waitTimeout, 10*time.Millisecond, "process %d was not reaped", pid)
}
