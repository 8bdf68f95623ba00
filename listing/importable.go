package listing

import "github.com/mcp-aggregator/mcp-aggregator/config"

// NothingToImport says why `import` prints nothing, or "" when it prints
// its translation. ws is the translation loaded back as a config (nil when
// it did not load) and errs the errors the translation itself found. A
// translation with no server to import is not printed: an empty config
// written over a watched one would stop every server it runs, where an
// empty file is refused. A server the config rejects still counts: it is
// printed, with its errors shown beside it.
func NothingToImport(ws *config.Workspace, errs int) string {
	if ws != nil && len(ws.Servers)+len(ws.Rejected) > 0 {
		return ""
	}
	if errs > 0 {
		return "no server could be read; nothing was printed"
	}
	return "the files define no server to import (none, or only disabled ones); nothing was printed"
}
