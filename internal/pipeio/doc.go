// Package pipeio reads and writes pipes and connections that are in
// non-blocking mode, through the runtime's poller, with system calls the
// scheduler is not told of: the stdio client's pipes and each stdio
// upstream's, the HTTP clients' connections and those to HTTP upstreams.
//
// A read(2) or write(2) on a non-blocking descriptor returns at once: with
// data, with room taken, or with EAGAIN. Go's os.File still announces each
// one to the scheduler as a call that may block, and on a process whose
// processors are all idle between messages that wakes the runtime's
// monitor thread for every system call, to sleep again a little later: on
// a stdio proxy at one message in flight, an eighth of its CPU time. A
// Pipe, and a connection from NewConn, makes the same calls directly and
// waits, when the descriptor has nothing to give or no room, through the
// poller as os.File does. Read and write deadlines and Close work as they
// do on the file, and errors are reported as the file's (or the net
// package's) own.
//
// A descriptor in blocking mode gets none of this: its reads and writes go
// to the file unchanged, since a direct call could then block a processor.
package pipeio
