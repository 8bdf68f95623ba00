package main

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

// Reload timing: editors write in bursts, so changes settle for
// reloadDebounce before a reload; the poll catches changes on filesystems
// that deliver no events. A file written in place must also stay unchanged
// for the settle period (--reload-settle); one that keeps changing for
// reloadSettleLimit, or for reloadSettleTimes settle periods if that is
// longer, is reported instead of loaded.
const (
	reloadDebounce    = 200 * time.Millisecond
	reloadPoll        = time.Second
	reloadSettle      = 300 * time.Millisecond
	reloadSettleLimit = 10 * time.Second
	reloadSettleTimes = 20
	maxReloadSettle   = time.Minute
)

// watchTiming is the watch's timing for a settle period.
func watchTiming(settle time.Duration) config.WatchTiming {
	return config.WatchTiming{Debounce: reloadDebounce, Poll: reloadPoll, Settle: settle,
		SettleLimit: max(reloadSettleLimit, reloadSettleTimes*settle)}
}

// watchConfig starts watching the config files and the env files they name
// (nil for the demo, or when they cannot be watched). Started before the
// first load, it sees a change made at any time after the files were read.
func watchConfig(ctx context.Context, src source, envFiles []string, settle time.Duration, log *slog.Logger) <-chan config.Change {
	if src.demo {
		return nil
	}
	paths := append(append([]string(nil), src.paths...), envFiles...)
	changed, err := config.Watch(ctx, paths, watchTiming(settle))
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
	src      source
	log      *slog.Logger
	cancel   context.CancelFunc
	envFiles []string
	settle   time.Duration // how long a file written in place must stay unchanged
	changed  <-chan config.Change
}

func startWatch(ctx context.Context, src source, envFiles []string, settle time.Duration, log *slog.Logger) *configWatch {
	wctx, cancel := context.WithCancel(ctx)
	return &configWatch{src: src, log: log, cancel: cancel, envFiles: envFiles, settle: settle,
		changed: watchConfig(wctx, src, envFiles, settle, log)}
}

// follow watches the env files ws names, when they are not those watched
// already; a rejected config (nil) keeps the watch as it is.
func (w *configWatch) follow(ctx context.Context, ws *config.Workspace) {
	if ws == nil || slices.Equal(ws.EnvFiles, w.envFiles) {
		return
	}
	w.cancel()
	*w = *startWatch(ctx, w.src, ws.EnvFiles, w.settle, w.log)
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
func watchAndReload(ctx context.Context, p *proxy.Proxy, w *configWatch, logins <-chan struct{}, hup <-chan os.Signal, log *slog.Logger,
	first func() (*config.Workspace, bool)) {
	defer func() { w.cancel() }()
	type outcome struct {
		ws *config.Workspace
		ok bool // false: stop watching
	}
	var (
		running chan outcome // the load under way delivers its outcome here; nil: none
		again   bool         // a change came while it ran
	)
	src := w.src // the same for every watch w follows
	start := func(load func() (*config.Workspace, bool)) {
		running = make(chan outcome, 1)
		go func(done chan<- outcome) {
			ws, ok := load()
			done <- outcome{ws, ok}
		}(running)
	}
	reloadOnce := func() (*config.Workspace, bool) { return reload(ctx, p, src, log), true }
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
			w.follow(ctx, o.ws)
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
				log.Debug("config written in place: reloading once it stays unchanged", "settle", w.settle)
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
		ws, _ := src.loadLive()
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
func reload(ctx context.Context, p *proxy.Proxy, src source, log *slog.Logger) *config.Workspace {
	ws, problems := src.loadLive()
	if ws == nil {
		log.Error("config rejected; keeping the last good config until the errors below are fixed")
	}
	running := p.Servers()
	report := p.Reconcile(ctx, ws, problems)
	logProblems(log, report.Problems, report.StartFailed)
	logRejected(log, ws, running)
	attrs := []any{"changed", report.Changed, "version", report.Version, "tools", p.Catalog().Len(), "failed", report.Failed}
	if len(report.Applied) > 0 {
		// Settings the running instances took on without a restart.
		attrs = append(attrs, "applied", strings.Join(report.Applied, "; "))
	}
	log.Info("reload done", attrs...)
	return ws
}

// logProblems logs each problem at its severity, but those of logged,
// which were logged as they happened (proxy.Options.OnStartFailed).
func logProblems(log *slog.Logger, problems []config.Problem, logged []config.Problem) {
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

// logRejected says, for each server whose definition has errors, what runs
// instead: the last good definition of a server that was running (running
// lists the servers of the last good config), else nothing.
func logRejected(log *slog.Logger, ws *config.Workspace, running []string) {
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
