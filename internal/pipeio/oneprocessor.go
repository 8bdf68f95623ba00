package pipeio

import (
	"log/slog"
	"os"
	"runtime"
)

// OneProcessor runs the process's Go code on one processor at a time,
// unless the GOMAXPROCS environment variable sets the number. It is meant
// for the stdio server once PollStdio has its client's pipes: a stdio
// server has one client and spends its time passing messages between pipes
// the poller watches. With a second processor idle, every hand-off from one
// goroutine to another (the reader's to a worker, an upstream's answer to
// its caller, a response to the writer) wakes a second thread, which on a
// small machine preempts the work it was woken for; on one processor those
// hand-offs are plain goroutine switches. The HTTP server, which has many
// clients, keeps every processor. The change is logged at debug level,
// with the number it replaced.
func OneProcessor(log *slog.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	log.Debug("serving stdio on one processor", "was", runtime.GOMAXPROCS(1), "override", "set GOMAXPROCS")
}
