package session

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/testproc"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// TestMain lets this test binary stand in for the upstream servers: started
// with MCPAGG_DEMO_SERVER set it serves that demo server on its stdio, so
// every pool below leases real processes.
func TestMain(m *testing.M) { testproc.Main(m) }

// waitTimeout bounds every wait; it is reached only when something is broken.
const waitTimeout = testproc.WaitTimeout

// demoFactory starts real instances of one demo server and remembers them.
type demoFactory struct {
	srv  *config.Server
	opts upstream.Options

	mu    sync.Mutex
	calls int
	pids  []int
}

func newDemoFactory(t testing.TB, spec string) *demoFactory {
	f := &demoFactory{
		srv: &config.Server{ID: spec, Transport: config.TransportStdio, Command: os.Args[0],
			Env: map[string]string{testproc.DemoEnv: spec}},
		opts: upstream.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			StdinGrace: 200 * time.Millisecond, TermGrace: 200 * time.Millisecond},
	}
	t.Cleanup(func() {
		for _, pid := range f.started() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return f
}

// start is the Factory handed to pools; every call counts.
func (f *demoFactory) start(ctx context.Context) (*upstream.Instance, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return f.launch(ctx)
}

func (f *demoFactory) launch(ctx context.Context) (*upstream.Instance, error) {
	inst, err := upstream.Start(ctx, f.srv, f.opts)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.pids = append(f.pids, inst.PID())
	f.mu.Unlock()
	return inst, nil
}

// first starts the instance a pool is created with, outside the call count.
func (f *demoFactory) first(t testing.TB) *upstream.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	inst, err := f.launch(ctx)
	require.NoError(t, err)
	return inst
}

func (f *demoFactory) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *demoFactory) started() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.pids...)
}

// events records a pool's events without ever blocking it.
type events struct {
	mu      sync.Mutex
	list    []Event
	changed chan struct{}
}

func newEvents() *events { return &events{changed: make(chan struct{})} }

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

func (e *events) all() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.list...)
}

// wait returns the first event of kind for which match (nil: any) holds.
func (e *events) wait(t *testing.T, kind string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		e.mu.Lock()
		changed := e.changed
		for _, ev := range e.list {
			if ev.Kind == kind && (match == nil || match(ev)) {
				e.mu.Unlock()
				return ev
			}
		}
		e.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %q event within %s; got %v", kind, waitTimeout, e.all())
		}
	}
}

func forKey(k Key) func(Event) bool { return func(ev Event) bool { return ev.Key == k } }

// requireReaped waits until pid is gone and reaped.
func requireReaped(t *testing.T, pid int) {
	t.Helper()
	testproc.RequireReaped(t, pid)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// acquire is Acquire with a generous deadline, failing the test on error.
func acquire(t testing.TB, p *Pool, key Key) *Grant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	g, err := p.Acquire(ctx, key)
	require.NoError(t, err)
	return g
}

// startPool is a pool of f's server, configured by cfg, created with its
// first instance started and closed when the test ends.
func startPool(t testing.TB, f *demoFactory, cfg Config) *Pool {
	t.Helper()
	p := NewPool(cfg, f.start, f.first(t))
	closePool(t, p)
	return p
}

// closePool closes p when the test ends, bounded.
func closePool(t testing.TB, p *Pool) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		p.Close(ctx)
	})
}
