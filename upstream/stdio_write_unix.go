//go:build unix

package upstream

import (
	"os"
	"syscall"
)

// quickWriter writes to a non-blocking pipe without waiting: one write(2)
// that takes what the pipe has room for at once. It is used only by the
// holder of the connection's write slot, so its fields need no lock.
type quickWriter struct {
	raw  syscall.RawConn // nil: the pipe is not non-blocking; never write without waiting
	line []byte          // the attempt's input
	n    int             // and its result
	try  func(fd uintptr) bool
}

// newQuickWriter prepares quick writes to f when f is in non-blocking mode
// (os.Pipe makes it so wherever the runtime poller takes the pipe). A
// descriptor in blocking mode gets none: a write(2) on it could block with
// no deadline to end it.
func newQuickWriter(f *os.File) *quickWriter {
	q := &quickWriter{}
	raw, err := f.SyscallConn()
	if err != nil {
		return q
	}
	nonBlocking := false
	if raw.Control(func(fd uintptr) {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonBlocking = errno == 0 && flags&syscall.O_NONBLOCK != 0
	}) != nil || !nonBlocking {
		return q
	}
	q.raw = raw
	q.try = func(fd uintptr) bool {
		n, err := syscall.Write(int(fd), q.line)
		if err != nil || n < 0 {
			n = 0 // EAGAIN (full), EINTR or a real error: the waiting write sees to it
		}
		q.n = n
		return true // never wait here
	}
	return q
}

// write writes as much of line as the pipe takes at once and returns how
// much that was: all of it, part, or nothing (the pipe is full, a deadline
// of an earlier write is still set, or writing failed; the caller then
// writes the rest with a deadline, which reports any error).
func (q *quickWriter) write(line []byte) int {
	if q.raw == nil || len(line) == 0 {
		return 0
	}
	q.line, q.n = line, 0
	err := q.raw.Write(q.try)
	q.line = nil
	if err != nil {
		return 0
	}
	return q.n
}
