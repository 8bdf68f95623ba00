//go:build unix

package pipeio

import (
	"io"
	"os"
	"syscall"
)

// PollStdio gives the stdio transport its client's pipes through the
// runtime's poller: stdin and stdout, when they are the process's own
// (os.Stdin, os.Stdout) and each is a pipe or a socket, are put in
// non-blocking mode and read and written as Pipes with direct system calls
// (see Poll). Waiting for the client then parks a goroutine instead of
// holding a thread in read(2) or write(2), which is what lets the stdio
// server run on one processor (OneProcessor). A terminal, a file or
// anything else is returned as it is.
//
// polled reports whether stdin is read through the poller: only then is the
// server's waiting for its client off the threads. restore puts the
// descriptors back in blocking mode, for whoever shares them after the
// aggregator; it is safe to call once the server has stopped using in and
// out.
func PollStdio(stdin io.Reader, stdout io.Writer) (in io.Reader, out io.Writer, polled bool, restore func()) {
	in, out = stdin, stdout
	var undo []func()
	if f, ok := stdin.(*os.File); ok && f == os.Stdin {
		if p, back, ok := Poll(f); ok {
			in, polled, undo = p, true, append(undo, back)
		}
	}
	if f, ok := stdout.(*os.File); ok && f == os.Stdout {
		if p, back, ok := Poll(f); ok {
			out, undo = p, append(undo, back)
		}
	}
	return in, out, polled, func() {
		for _, back := range undo {
			back()
		}
	}
}

// Poll returns f as a Pipe the poller serves, when f is a pipe or a socket:
// its descriptor is put in non-blocking mode and duplicated (close-on-exec),
// and the duplicate opened as a file of the poller, since os.File decides
// whether to use the poller when it is made (os.Stdin, made at start,
// never does). The mode belongs to what both descriptors share, so f is
// non-blocking too until restore puts it back in blocking mode. f is
// otherwise left as it is, and each file closes its own descriptor only:
// no finalizer of the Pipe's file closes f's (for os.Stdin, descriptor 0).
// ok is false, with nothing changed, for anything else: a terminal, a
// regular file, a device.
func Poll(f *os.File) (p *Pipe, restore func(), ok bool) {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, nil, false
	}
	dup := -1
	cerr := raw.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if syscall.Fstat(int(fd), &st) != nil {
			return
		}
		if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
			return
		}
		if syscall.SetNonblock(int(fd), true) != nil {
			return
		}
		// Under the fork lock, so that no process started meanwhile
		// inherits the duplicate before it is marked close-on-exec.
		syscall.ForkLock.RLock()
		d, err := syscall.Dup(int(fd))
		if err == nil {
			syscall.CloseOnExec(d)
		}
		syscall.ForkLock.RUnlock()
		if err != nil {
			_ = syscall.SetNonblock(int(fd), false)
			return
		}
		dup = d
	})
	if cerr != nil || dup < 0 {
		return nil, nil, false
	}
	p = New(os.NewFile(uintptr(dup), f.Name()))
	return p, func() { _ = syscall.SetNonblock(dup, false) }, true
}
