package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/proxy"
)

// Reload timing: editors write in bursts, so changes settle for
// reloadDebounce before a reload; the poll catches changes on filesystems
// that deliver no events.
const (
	reloadDebounce = 200 * time.Millisecond
	reloadPoll     = time.Second
)

// watchConfig starts watching the config files (nil for the demo, or when
// they cannot be watched). Started before the first load, it sees a change
// made at any time after the files were read.
func watchConfig(ctx context.Context, src source, log *slog.Logger) <-chan struct{} {
	if src.demo {
		return nil
	}
	changed, err := config.Watch(ctx, src.paths, reloadDebounce, reloadPoll)
	if err != nil {
		log.Warn("cannot watch the config; reload with SIGHUP", "err", err)
		return nil
	}
	return changed
}

// watchAndReload reloads the config whenever changed fires or the process
// receives SIGHUP, until ctx ends. A changed stored login (logins) reloads
// too: the servers that were waiting for it start.
func watchAndReload(ctx context.Context, p *proxy.Proxy, src source, changed, logins <-chan struct{}, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading config")
		case _, ok := <-changed:
			if !ok {
				return
			}
			log.Info("config changed: reloading")
		case <-logins:
			log.Info("a stored OAuth login changed: reloading")
		}
		reload(ctx, p, src, log)
	}
}

func reload(ctx context.Context, p *proxy.Proxy, src source, log *slog.Logger) {
	ws, problems := src.loadLive()
	if ws == nil {
		log.Error("config rejected; keeping the last good config")
	}
	report := p.Reconcile(ctx, ws, problems)
	for _, pr := range report.Problems {
		if pr.Severity == config.SeverityError {
			log.Error(pr.String())
		} else {
			log.Warn(pr.String())
		}
	}
	log.Info("reload done", "changed", report.Changed, "version", report.Version, "tools", p.Catalog().Len(), "failed", report.Failed)
}
