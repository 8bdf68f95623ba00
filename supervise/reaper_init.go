package supervise

import "os"

// ReaperCommand is the hidden subcommand that makes the binary the reaper
// process: `BINARY _reaper`, with the aggregator's end of the pipe on its
// stdin (Options.Reaper).
const ReaperCommand = "_reaper"

// The reaper runs from this package's initialisation, not from main. Go
// initialises packages in the order of their import paths, each once its
// own imports are (the language's "Package initialization"); this one
// imports the standard library, golang.org/x/sys and internal/memtrim
// only, so it comes before the packages of the rest of the binary that
// the reaper never uses, some of which build megabytes of tables as they
// initialise (JSON Schema meta-schemas, CEL, Prometheus): a reaper that
// waited for main would hold all of them for its whole life.
func init() {
	if len(os.Args) == 2 && os.Args[1] == ReaperCommand {
		RunReaper(os.Stdin)
		os.Exit(0)
	}
}
