//go:build unix

package pipeio

import (
	"errors"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// Pipe is a file read and written through the poller with direct system
// calls when it is in non-blocking mode (see the package comment). One
// goroutine at a time may read and one at a time may write: the state of
// an attempt is kept in the Pipe, so that no call allocates.
type Pipe struct {
	f   *os.File
	raw syscall.RawConn // nil: blocking mode; every call goes to f

	rbuf  []byte // the read in progress, its result and its error
	rn    int
	rerr  syscall.Errno
	rtry  func(fd uintptr) bool
	wbuf  []byte // the write in progress, likewise
	wn    int
	werr  syscall.Errno
	wtry  func(fd uintptr) bool
	wonce func(fd uintptr) bool
}

// New returns a Pipe on f.
func New(f *os.File) *Pipe {
	p := &Pipe{f: f}
	raw, err := f.SyscallConn()
	if err != nil || !nonBlocking(raw) {
		return p
	}
	p.raw = raw
	p.rtry = p.readOnce
	p.wtry = p.writeSome
	p.wonce = func(fd uintptr) bool {
		p.writeSome(fd)
		return true // never wait
	}
	return p
}

// Direct reports whether p makes its system calls directly (the file is in
// non-blocking mode).
func (p *Pipe) Direct() bool { return p.raw != nil }

// File is the file p reads and writes.
func (p *Pipe) File() *os.File { return p.f }

func nonBlocking(raw syscall.RawConn) bool {
	nb := false
	err := raw.Control(func(fd uintptr) {
		flags, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nb = errno == 0 && flags&syscall.O_NONBLOCK != 0
	})
	return err == nil && nb
}

// Read reads what the descriptor has, waiting through the poller while it
// has nothing.
func (p *Pipe) Read(b []byte) (int, error) {
	if p.raw == nil {
		return p.f.Read(b)
	}
	if len(b) == 0 {
		return 0, nil
	}
	p.rbuf, p.rn, p.rerr = b, 0, 0
	err := p.raw.Read(p.rtry)
	n, errno := p.rn, p.rerr
	p.rbuf = nil
	switch {
	case err != nil:
		return 0, p.wrap("read", err)
	case errno != 0:
		return 0, &os.PathError{Op: "read", Path: p.f.Name(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce makes one read(2); false asks the poller to wait for data.
func (p *Pipe) readOnce(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p.rbuf[0])), uintptr(len(p.rbuf)))
		switch errno {
		case 0:
			p.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		p.rerr = errno
		return true
	}
}

// Write writes all of b, waiting through the poller while the descriptor
// has no room, up to the file's write deadline.
func (p *Pipe) Write(b []byte) (int, error) {
	if p.raw == nil {
		return p.f.Write(b)
	}
	p.wbuf, p.wn, p.werr = b, 0, 0
	err := p.raw.Write(p.wtry)
	n, errno := p.wn, p.werr
	p.wbuf = nil
	if err != nil {
		return n, p.wrap("write", err)
	}
	if errno != 0 {
		return n, &os.PathError{Op: "write", Path: p.f.Name(), Err: errno}
	}
	return n, nil
}

// wrap reports an error of the poller as the file would: a deadline that
// passed, else the file was closed (the only other error it has for a
// descriptor it serves).
func (p *Pipe) wrap(op string, err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		err = os.ErrClosed
	}
	return &os.PathError{Op: op, Path: p.f.Name(), Err: err}
}

// TryWrite writes as much of b as the descriptor takes at once, without
// waiting, and returns how much that was. It returns 0, and no error, on a
// file in blocking mode: only Write writes to one.
func (p *Pipe) TryWrite(b []byte) (int, error) {
	if p.raw == nil || len(b) == 0 {
		return 0, nil
	}
	p.wbuf, p.wn, p.werr = b, 0, 0
	err := p.raw.Write(p.wonce)
	n, errno := p.wn, p.werr
	p.wbuf = nil
	if err != nil {
		return n, p.wrap("write", err)
	}
	if errno != 0 {
		return n, &os.PathError{Op: "write", Path: p.f.Name(), Err: errno}
	}
	return n, nil
}

// writeSome writes until all is written, the descriptor is full (false:
// wait for room) or a write fails.
func (p *Pipe) writeSome(fd uintptr) bool {
	for p.wn < len(p.wbuf) {
		rest := p.wbuf[p.wn:]
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch errno {
		case 0:
			p.wn += int(n)
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		p.werr = errno
		return true
	}
	return true
}
