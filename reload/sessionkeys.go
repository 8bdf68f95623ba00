package reload

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/sealed"
)

// SessionKeys reads serve --session-key-file and keeps its keys in force
// as the file changes, watched as the config files are, until ctx ends: a
// file that no longer loads leaves the last good keys in force, with an
// error in the log naming the file and line (never a key). No file: nil,
// and session ids are not sealed.
func SessionKeys(ctx context.Context, path string, settle time.Duration, log *slog.Logger) (*sealed.Keys, error) {
	if path == "" {
		return nil, nil
	}
	ring, err := sealed.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--session-key-file: %w", err)
	}
	if info, err := os.Stat(path); err == nil && info.Mode().Perm()&0o044 != 0 {
		log.Warn("the session key file may be read by other users: anyone who reads it can forge session ids; chmod 600 it (a Kubernetes Secret mount: defaultMode 0400)", "file", path, "mode", info.Mode().Perm().String())
	}
	keys := &sealed.Keys{}
	keys.Set(ring)
	log.Info("session ids are sealed", "file", path, "keys", ring.Len())
	changed, err := config.Watch(ctx, []string{path}, Timing(settle))
	if err != nil {
		log.Warn("cannot watch the session key file; restart to change the keys", "file", path, "err", err)
		return keys, nil
	}
	go func() {
		for ch := range changed {
			switch {
			case ch.Pending:
				continue
			case ch.Err != nil:
				log.Warn("the session key file keeps changing; the keys in force stay", "file", path, "err", ch.Err)
				continue
			}
			ring, err := sealed.LoadFile(path)
			if err != nil {
				log.Error("the session key file does not load; the keys in force stay", "err", err)
				continue
			}
			keys.Set(ring)
			log.Info("session keys reloaded", "file", path, "keys", ring.Len())
		}
	}()
	return keys, nil
}
