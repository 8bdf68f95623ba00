package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
	"github.com/mcp-aggregator/mcp-aggregator/supervise"
)

// demoEnv names the demo server a child copy of this test binary serves
// ("tools", "misbehave crash-after 1", ...).
const demoEnv = "MCPAGG_DEMO_SERVER"

// reaperArg makes a child copy of this test binary run the reaper
// (supervise.RunReaper).
const reaperArg = "upstream-reaper"

// reaperTeeArg makes a child copy of this test binary a stand-in reaper:
// "upstream-reaper-tee FIFO" copies what it is told to FIFO, and kills
// nothing.
const reaperTeeArg = "upstream-reaper-tee"

// TestMain lets this test binary stand in for the upstream servers: started
// with MCPAGG_DEMO_SERVER set it serves that demo server on its stdio, so the
// tests below talk to real processes. "demo-server NAME ARGS" is accepted
// too, because that is how the ignore-term server starts its grandchild.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "demo-server" {
		os.Exit(serveDemo(os.Args[2], os.Args[3:]))
	}
	if len(os.Args) == 2 && os.Args[1] == reaperArg {
		supervise.RunReaper(os.Stdin)
		os.Exit(0)
	}
	if len(os.Args) == 3 && os.Args[1] == reaperTeeArg {
		os.Exit(teeReaper(os.Args[2]))
	}
	if code, ran := demo.RunFromEnv(demoEnv); ran {
		os.Exit(code)
	}
	demo.QuietRaceExit()
	os.Exit(m.Run())
}

func teeReaper(fifo string) int {
	out, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, _ = io.Copy(out, os.Stdin)
	_ = out.Close()
	return 0
}

func serveDemo(name string, args []string) int {
	if err := demo.Run(context.Background(), name, args, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// waitTimeout bounds every wait; it is reached only when something is broken.
const waitTimeout = 20 * time.Second

// demoServer is a stdio server config that runs this test binary as the
// demo server spec.
func demoServer(id, spec string) *config.Server {
	return &config.Server{
		ID: id, Transport: config.TransportStdio, Command: os.Args[0],
		Env: map[string]string{demoEnv: spec},
	}
}

// startDemo starts a demo server instance and closes it when the test ends.
func startDemo(t *testing.T, spec string, opts Options) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if opts.Logger == nil {
		opts.Logger = newLogRecorder().logger()
	}
	inst, err := Start(ctx, demoServer(strings.Fields(spec)[0], spec), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

// logRecorder is a slog handler that keeps every record as one line of text,
// so tests can wait for what an instance logged (an upstream's stderr above all).
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

// childrenOf lists the pids whose parent is ppid, from /proc.
func childrenOf(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		var state string
		var parent int
		if _, err := fmt.Sscanf(string(stat[i+2:]), "%s %d", &state, &parent); err == nil && parent == ppid {
			out = append(out, pid)
		}
	}
	return out
}
