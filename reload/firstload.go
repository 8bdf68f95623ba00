package reload

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// FirstLoad loads the config and starts every upstream, watched by
// required. It returns a non-zero exit code when a required server could
// not start, and the workspace loaded (nil when it was rejected).
func (l *Loop) FirstLoad(ctx context.Context, required *Required) (int, *config.Workspace) {
	p, log, watch := l.Proxy, l.Logger, required
	defer p.MarkLoaded()
	ws, problems := l.Load()
	if ws == nil {
		log.Error("config rejected; serving no upstream server until the errors below are fixed (the config is reloaded when it changes, or on SIGHUP)")
	}
	watch.Arm(ws)
	report := p.Reconcile(ctx, ws, problems)
	watch.Disarm()
	LogProblems(log, report.Problems, report.StartFailed)
	LogRejected(log, ws, nil)
	// One line, of bounded length however many tools the upstreams export.
	const shown = 100
	entries := p.Catalog().Entries()
	names := make([]string, 0, min(len(entries), shown)+1)
	for _, e := range entries[:min(len(entries), shown)] {
		names = append(names, e.Exported)
	}
	if len(entries) > shown {
		names = append(names, fmt.Sprintf("… (%d more; tools/list or mcp-aggregator tools lists them)", len(entries)-shown))
	}
	log.Info("exporting tools", "count", len(entries), "tools", strings.Join(names, ", "), "version", report.Version)
	if ws != nil {
		for _, s := range ws.Servers {
			if s.Required && slices.Contains(report.Failed, s.ID) {
				watch.exit(s.ID) // once: it may have been told as the server failed
				return 1, ws
			}
		}
	}
	return 0, ws
}

// Required ends serve as soon as a server marked required fails to start
// on the first load, rather than when the slowest other server is ready
// or past its connect_timeout. Reloads are not watched: a required server
// that fails in one keeps its last good state.
type Required struct {
	log    *slog.Logger
	loaded chan<- int // serve exits with the code sent here

	mu       sync.Mutex
	required map[string]bool // while the first load runs: the required servers
	told     bool            // serve was told to exit
}

// NewRequired is the watch of the first load that sends serve's exit code
// to loaded when a required server fails.
func NewRequired(log *slog.Logger, loaded chan<- int) *Required {
	return &Required{log: log, loaded: loaded}
}

// Arm watches the required servers of ws (nil: none) until disarm.
func (w *Required) Arm(ws *config.Workspace) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.required = map[string]bool{}
	if ws == nil {
		return
	}
	for _, s := range ws.Servers {
		if s.Required {
			w.required[s.ID] = true
		}
	}
}

// Disarm ends the watch: the first load is over.
func (w *Required) Disarm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.required = nil
}

// StartFailed is told of each server whose start failed, every attempt
// spent (proxy.Options.OnStartFailed).
func (w *Required) StartFailed(id string) {
	w.mu.Lock()
	watched := w.required[id]
	w.mu.Unlock()
	if watched && w.exit(id) {
		w.loaded <- 1
	}
}

// exit logs why serve exits, the first time only, and reports whether this
// was the first.
func (w *Required) exit(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told {
		return false
	}
	w.told = true
	w.log.Error("a required server could not start; exiting", "server", id,
		"fix", "repair the server or set required: false to serve without it")
	return true
}
