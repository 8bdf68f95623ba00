package reload

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// Reload timing: editors write in bursts, so changes settle for debounce
// before a reload; the poll catches changes on filesystems that deliver no
// events. A file written in place must also stay unchanged for the settle
// period (serve's --reload-settle, DefaultSettle unless set); one that
// keeps changing for settleLimit, or for settleTimes settle periods if that
// is longer, is reported instead of loaded.
const (
	debounce      = 200 * time.Millisecond
	poll          = time.Second
	DefaultSettle = 300 * time.Millisecond
	settleLimit   = 10 * time.Second
	settleTimes   = 20
	// MaxSettle is the longest settle period allowed.
	MaxSettle = time.Minute
)

// Timing is the timing of a watch of files for a settle period.
func Timing(settle time.Duration) config.WatchTiming {
	return config.WatchTiming{Debounce: debounce, Poll: poll, Settle: settle,
		SettleLimit: max(settleLimit, settleTimes*settle)}
}

// Loop is the reload loop of serve: the first load of the config, then a
// reload whenever a config file or an env file it names changes, a signal
// asks (SIGHUP), or a stored login changed.
type Loop struct {
	Proxy *proxy.Proxy
	// Load reads the config as it is now.
	Load func() (*config.Workspace, []config.Problem)
	// Paths are the config files to watch; none (the embedded demo): no
	// watch, reloads by Signals and Logins alone.
	Paths []string
	// Settle is how long a file written in place must stay unchanged.
	Settle time.Duration
	// Logins delivers when a stored login changed: the servers that were
	// waiting for it start. Signals delivers SIGHUP. Either may be nil.
	Logins  <-chan struct{}
	Signals <-chan os.Signal
	Logger  *slog.Logger
}

// Run starts watching the files, then runs first, the first load of the
// config, and reloads as Loop says until ctx ends or first reports that
// the aggregator cannot go on. The watch starts before the first load, so
// that no change saved after the files were read is missed.
func (l *Loop) Run(ctx context.Context, first func() (*config.Workspace, bool)) {
	w := l.startWatch(ctx, nil)
	l.watchAndReload(ctx, w, first)
}

// watchConfig starts watching the config files and the env files they name
// (nil for the demo, or when they cannot be watched). Started before the
// first load, it sees a change made at any time after the files were read.
func (l *Loop) watchConfig(ctx context.Context, envFiles []string) <-chan config.Change {
	if len(l.Paths) == 0 {
		return nil
	}
	log := l.Logger
	paths := append(append([]string(nil), l.Paths...), envFiles...)
	changed, err := config.Watch(ctx, paths, Timing(l.Settle))
	if err != nil {
		log.Warn("cannot watch the config; reload with SIGHUP", "err", err)
		return nil
	}
	log.Debug("watching for changes", "files", strings.Join(paths, string(filepath.ListSeparator)))
	return changed
}

// configWatch is the running watch of the config files and of the env files
// the last good config names.
type configWatch struct {
	cancel   context.CancelFunc
	envFiles []string
	changed  <-chan config.Change
}

func (l *Loop) startWatch(ctx context.Context, envFiles []string) *configWatch {
	wctx, cancel := context.WithCancel(ctx)
	return &configWatch{cancel: cancel, envFiles: envFiles, changed: l.watchConfig(wctx, envFiles)}
}

// follow watches the env files ws names, when they are not those watched
// already; a rejected config (nil) keeps the watch as it is.
func (l *Loop) follow(ctx context.Context, w *configWatch, ws *config.Workspace) {
	if ws == nil || slices.Equal(ws.EnvFiles, w.envFiles) {
		return
	}
	w.cancel()
	*w = *l.startWatch(ctx, ws.EnvFiles)
}

// watchAndReload runs first, the first load of the config, then reloads it
// whenever the watch fires or hup (SIGHUP) delivers, until ctx ends or
// first reports that the aggregator cannot go on. A changed stored login
// (logins) reloads too: the servers that were waiting for it start.
//
// A load waits for the servers it starts, up to their connect_timeout. A
// change that comes meanwhile is not left waiting behind a server that
// hangs: the config is read at once, the starts it no longer wants (a
// server removed, or defined otherwise) are abandoned, and it is reloaded
// as soon as the load under way ends.
func (l *Loop) watchAndReload(ctx context.Context, w *configWatch, first func() (*config.Workspace, bool)) {
	defer func() { w.cancel() }()
	p, log, logins, hup := l.Proxy, l.Logger, l.Logins, l.Signals
	type outcome struct {
		ws *config.Workspace
		ok bool // false: stop watching
	}
	var (
		running chan outcome // the load under way delivers its outcome here; nil: none
		again   bool         // a change came while it ran
	)
	start := func(load func() (*config.Workspace, bool)) {
		running = make(chan outcome, 1)
		go func(done chan<- outcome) {
			ws, ok := load()
			done <- outcome{ws, ok}
		}(running)
	}
	reloadOnce := func() (*config.Workspace, bool) { return l.reload(ctx), true }
	defer func() {
		if running != nil {
			<-running // it ends quickly: ctx is done
		}
	}()
	start(first)
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-running:
			running = nil
			if !o.ok {
				return
			}
			l.follow(ctx, w, o.ws)
			if again {
				again = false
				start(reloadOnce)
			}
			continue
		case <-hup:
			log.Info("SIGHUP: reloading config")
		case c, ok := <-w.changed:
			if !ok {
				return
			}
			if c.Pending {
				log.Debug("config written in place: reloading once it stays unchanged", "settle", l.Settle)
				continue
			}
			if c.Err != nil {
				log.Error("config not reloaded; keeping the running config", "err", c.Err)
				continue
			}
			log.Info("config changed: reloading")
		case <-logins:
			log.Info("a stored OAuth login changed: reloading")
		}
		if running == nil {
			start(reloadOnce)
			continue
		}
		again = true
		ws, _ := l.Load()
		if abandoned := p.Supersede(ws); len(abandoned) > 0 {
			log.Info("a newer config came while servers started: abandoning the starts it no longer wants; it is reloaded next",
				"servers", strings.Join(abandoned, ","))
		} else {
			log.Info("a load is under way: the newer config is reloaded once it ends")
		}
	}
}

// reload loads the config and applies it; it returns the workspace loaded, nil
// when it was rejected.
func (l *Loop) reload(ctx context.Context) *config.Workspace {
	p, log := l.Proxy, l.Logger
	ws, problems := l.Load()
	if ws == nil {
		log.Error("config rejected; keeping the last good config until the errors below are fixed")
	}
	running := p.Servers()
	report := p.Reconcile(ctx, ws, problems)
	LogProblems(log, report.Problems, report.StartFailed)
	LogRejected(log, ws, running)
	attrs := []any{"changed", report.Changed, "version", report.Version, "tools", p.Catalog().Len(), "failed", report.Failed}
	if len(report.Applied) > 0 {
		// Settings the running instances took on without a restart.
		attrs = append(attrs, "applied", strings.Join(report.Applied, "; "))
	}
	log.Info("reload done", attrs...)
	return ws
}

// LogProblems logs each problem at its severity, but those of logged,
// which were logged as they happened (proxy.Options.OnStartFailed).
func LogProblems(log *slog.Logger, problems []config.Problem, logged []config.Problem) {
	for _, pr := range problems {
		if slices.Contains(logged, pr) {
			continue
		}
		if pr.Severity == config.SeverityError {
			log.Error(pr.String())
		} else {
			log.Warn(pr.String())
		}
	}
}

// LogRejected says, for each server whose definition has errors, what runs
// instead: the last good definition of a server that was running (running
// lists the servers of the last good config), else nothing.
func LogRejected(log *slog.Logger, ws *config.Workspace, running []string) {
	if ws == nil {
		return
	}
	for _, id := range ws.Rejected {
		if slices.Contains(running, id) {
			log.Warn("server definition has errors; the server keeps its last good instance and tools until they are fixed", "server", id)
		} else {
			log.Warn("server definition has errors; the server is not started until they are fixed", "server", id)
		}
	}
}
