package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
)

// exitProcess ends the process; the misbehave modes that crash on purpose
// call it, and tests replace it.
var exitProcess = os.Exit

var servers = map[string]func(ctx context.Context, args []string, in io.Reader, out io.Writer, errOut io.Writer) error{
	"tools":     runTools,
	"counter":   runCounter,
	"fidelity":  runFidelity,
	"misbehave": runMisbehave,
	"daemon":    runDaemon,
	"surface":   runSurface,
}

// Run serves the demo server called name over stdio (in/out), until in
// reaches EOF or ctx ends. Both are a normal end and return nil; an error
// means an unknown name, bad arguments or a failed read or write. errOut
// receives diagnostics and may be nil.
func Run(ctx context.Context, name string, args []string, in io.Reader, out io.Writer, errOut io.Writer) error {
	run, ok := servers[name]
	if !ok {
		return fmt.Errorf("demo: unknown server %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	if errOut == nil {
		errOut = io.Discard
	}
	err := run(ctx, args, in, out, &syncWriter{w: errOut})
	if err != nil && ctx.Err() != nil && (err == ctx.Err() || err == context.Canceled || err == context.DeadlineExceeded) {
		return nil
	}
	return err
}

// Names lists the demo servers Run knows, sorted.
func Names() []string {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// syncWriter serialises writes so that concurrent handlers writing
// diagnostics never interleave within a line.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// fileOf returns w as an *os.File when it is one (directly or behind a
// syncWriter), so a child process can inherit it.
func fileOf(w io.Writer) *os.File {
	if s, ok := w.(*syncWriter); ok {
		w = s.w
	}
	f, _ := w.(*os.File)
	return f
}

// pattern fills n bytes with a repeating, deterministic ASCII pattern.
func pattern(n int) string {
	const unit = "0123456789abcdef"
	var b strings.Builder
	b.Grow(n)
	for b.Len()+len(unit) <= n {
		b.WriteString(unit)
	}
	b.WriteString(unit[:n-b.Len()])
	return b.String()
}
