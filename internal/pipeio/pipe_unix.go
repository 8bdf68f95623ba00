//go:build unix

package pipeio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Pipe is a file read and written through the poller with direct system
// calls when it is in non-blocking mode (see the package comment). The
// state of an attempt is kept in the Pipe, so that no call allocates; a
// lock per direction keeps concurrent reads (or writes) one at a time, as
// the poller does for the file's own.
type Pipe struct {
	rmu, wmu sync.Mutex

	plain io.ReadWriter                    // where calls go when raw is nil
	raw   syscall.RawConn                  // nil: blocking mode; every call goes to plain
	wrap  func(op string, err error) error // reports an error as plain would

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
	p := &Pipe{plain: f, wrap: fileError(f.Name())}
	if raw, err := f.SyscallConn(); err == nil && nonBlocking(raw) {
		p.direct(raw)
	}
	return p
}

// NewConn returns c with its reads and writes made directly, when c is a
// connection of the runtime's poller (TCP, Unix); else c as it is. Errors
// are reported as c's own would be.
func NewConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil || !nonBlocking(raw) {
		return c
	}
	p := &Pipe{plain: c, wrap: connError(c)}
	p.direct(raw)
	return &conn{Conn: c, p: p}
}

func (p *Pipe) direct(raw syscall.RawConn) {
	p.raw = raw
	p.rtry = p.readOnce
	p.wtry = p.writeSome
	p.wonce = func(fd uintptr) bool {
		p.writeSome(fd)
		return true // never wait
	}
}

// Direct reports whether p makes its system calls directly (the file is in
// non-blocking mode).
func (p *Pipe) Direct() bool { return p.raw != nil }

// conn is a connection whose reads and writes go through a Pipe.
type conn struct {
	net.Conn
	p *Pipe
}

func (c *conn) Read(b []byte) (int, error)  { return c.p.Read(b) }
func (c *conn) Write(b []byte) (int, error) { return c.p.Write(b) }

// fileError reports errors as os.File does: a *os.PathError, whose Err is
// the system call's errno, os.ErrDeadlineExceeded, or os.ErrClosed.
func fileError(name string) func(op string, err error) error {
	return func(op string, err error) error {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.As(err, new(syscall.Errno)):
		default:
			err = os.ErrClosed // the poller's only other error
		}
		return &os.PathError{Op: op, Path: name, Err: err}
	}
}

// connError reports errors as the net package does: a *net.OpError, whose
// Err is an *os.SyscallError, os.ErrDeadlineExceeded, or net.ErrClosed.
func connError(c net.Conn) func(op string, err error) error {
	network := c.LocalAddr().Network()
	return func(op string, err error) error {
		var errno syscall.Errno
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.As(err, &errno):
			err = os.NewSyscallError(op, errno)
		default:
			err = net.ErrClosed
		}
		return &net.OpError{Op: op, Net: network, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
}

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
		return p.plain.Read(b)
	}
	if len(b) == 0 {
		return 0, nil
	}
	p.rmu.Lock()
	defer p.rmu.Unlock()
	p.rbuf, p.rn, p.rerr = b, 0, 0
	err := p.raw.Read(p.rtry)
	n, errno := p.rn, p.rerr
	p.rbuf = nil
	switch {
	case err != nil:
		return 0, p.wrap("read", err)
	case errno != 0:
		return 0, p.wrap("read", errno)
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
		return p.plain.Write(b)
	}
	return p.write(b, p.wtry)
}

// TryWrite writes as much of b as the descriptor takes at once, without
// waiting, and returns how much that was. It returns 0, and no error, on a
// file in blocking mode: only Write writes to one.
func (p *Pipe) TryWrite(b []byte) (int, error) {
	if p.raw == nil || len(b) == 0 {
		return 0, nil
	}
	return p.write(b, p.wonce)
}

// write writes b through the poller with try (wtry or wonce).
func (p *Pipe) write(b []byte, try func(fd uintptr) bool) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.wbuf, p.wn, p.werr = b, 0, 0
	err := p.raw.Write(try)
	n, errno := p.wn, p.werr
	p.wbuf = nil
	if err != nil {
		return n, p.wrap("write", err)
	}
	if errno != 0 {
		return n, p.wrap("write", errno)
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
