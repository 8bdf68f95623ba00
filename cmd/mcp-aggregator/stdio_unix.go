//go:build unix

package main

import (
	"io"
	"os"
	"syscall"

	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// pollableStdio gives the stdio transport its client's pipes through the
// runtime's poller: stdin and stdout, when they are the process's own and each
// is a pipe or a socket, are put in non-blocking mode and opened again as
// files the poller serves, read and written with direct system calls
// (internal/pipeio). Waiting for the client then parks a goroutine
// instead of holding a thread in read(2) or write(2), which is what lets the
// stdio server run on one processor (see oneProcessor). A terminal, a file or
// anything else is left as it is. restore puts the descriptors back in
// blocking mode, for whoever shares them after the aggregator. polled reports
// whether stdin is read through the poller.
func pollableStdio(stdin io.Reader, stdout io.Writer) (in io.Reader, out io.Writer, polled bool, restore func()) {
	in, out = stdin, stdout
	var undo []int
	if f, ok := stdin.(*os.File); ok && f == os.Stdin && nonblocking(0) {
		pollStdin = os.NewFile(0, f.Name())
		in, undo, polled = pipeio.New(pollStdin), append(undo, 0), true
	}
	if f, ok := stdout.(*os.File); ok && f == os.Stdout && nonblocking(1) {
		pollStdout = os.NewFile(1, f.Name())
		out, undo = pipeio.New(pollStdout), append(undo, 1)
	}
	return in, out, polled, func() {
		for _, fd := range undo {
			_ = syscall.SetNonblock(fd, false)
		}
	}
}

// pollStdin and pollStdout keep the poller's files of descriptors 0 and 1
// reachable for the life of the process, so that no finalizer closes them.
var pollStdin, pollStdout *os.File

// nonblocking puts fd in non-blocking mode if it is a pipe or a socket.
func nonblocking(fd int) bool {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return false
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK:
		return syscall.SetNonblock(fd, true) == nil
	}
	return false
}
