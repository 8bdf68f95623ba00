//go:build unix

package pipeio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = r.Close(), w.Close() })
	return r, w
}

// The write that does not wait takes what the pipe has room for and never
// blocks: not on a full pipe, and not when a deadline of an earlier write
// has passed.
func TestTryWriteNeverWaits(t *testing.T) {
	t.Parallel()
	r, w := pipe(t)
	p := New(w)
	require.True(t, p.Direct(), "os.Pipe gives a non-blocking pipe")

	n, err := p.TryWrite([]byte("hello"))
	require.NoError(t, err)
	assert.Equal(t, 5, n, "a pipe with room takes it all")
	got := make([]byte, 5)
	_, err = io.ReadFull(r, got)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))

	// An earlier write's deadline has passed: nothing is written here, so
	// that the waiting write, which sets its own deadline, does it.
	require.NoError(t, w.SetWriteDeadline(time.Unix(1, 0)))
	n, _ = p.TryWrite([]byte("x"))
	assert.Equal(t, 0, n)
	require.NoError(t, w.SetWriteDeadline(time.Time{}))

	// A full pipe: part of a large message, then nothing, without blocking.
	big := bytes.Repeat([]byte("y"), 1<<20)
	n, err = p.TryWrite(big)
	require.NoError(t, err)
	assert.True(t, n > 0 && n < len(big), "a message larger than the pipe goes in part (%d bytes)", n)
	n, err = p.TryWrite([]byte("z"))
	assert.NoError(t, err)
	assert.Equal(t, 0, n, "a full pipe takes nothing")
	n, _ = p.TryWrite(nil)
	assert.Equal(t, 0, n)
}

// A descriptor in blocking mode is left to the file: no direct call could
// be bounded on it.
func TestBlockingDescriptorsGoToTheFile(t *testing.T) {
	t.Parallel()
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	// os.NewFile keeps a descriptor in blocking mode as it is.
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	defer w.Close()
	pw, pr := New(w), New(r)
	assert.False(t, pw.Direct())
	n, _ := pw.TryWrite([]byte("hello"))
	assert.Equal(t, 0, n, "no write without a deadline")
	n, err := pw.Write([]byte("hello\n"))
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	buf := make([]byte, 16)
	n, err = pr.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(buf[:n]))
}

// Read waits for data through the poller, and ends with io.EOF when the
// writer closes, with the deadline's error when it passes, and at once
// when the file is closed.
func TestReadWaitsAndEnds(t *testing.T) {
	t.Parallel()
	r, w := pipe(t)
	pr, pw := New(r), New(w)
	buf := make([]byte, 64)

	got := make(chan string, 1)
	go func() {
		n, err := pr.Read(buf)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	n, err := pw.Write([]byte("late line\n"))
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Equal(t, "late line\n", <-got)

	require.NoError(t, r.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err = pr.Read(buf)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, r.SetReadDeadline(time.Time{}))

	ended := make(chan error, 1)
	go func() { _, err := pr.Read(buf); ended <- err }()
	require.NoError(t, w.Close())
	assert.ErrorIs(t, <-ended, io.EOF)

	r2, _ := pipe(t)
	pr2 := New(r2)
	ended = make(chan error, 1)
	go func() { _, err := pr2.Read(buf); ended <- err }()
	require.NoError(t, r2.Close())
	assert.ErrorIs(t, <-ended, os.ErrClosed)
}

// Write waits for room and takes all of a message larger than the pipe;
// a write deadline ends the wait, reporting what went out.
func TestWriteWaitsForRoom(t *testing.T) {
	t.Parallel()
	r, w := pipe(t)
	pw := New(w)
	big := bytes.Repeat([]byte("x"), 1<<20)
	read := make(chan int, 1)
	go func() {
		n, _ := io.Copy(io.Discard, io.LimitReader(r, int64(len(big))))
		read <- int(n)
	}()
	n, err := pw.Write(big)
	require.NoError(t, err)
	assert.Equal(t, len(big), n)
	assert.Equal(t, len(big), <-read)

	require.NoError(t, w.SetWriteDeadline(time.Now().Add(20*time.Millisecond)))
	n, err = pw.Write(big)
	assert.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
	assert.True(t, n > 0 && n < len(big), "part went out: %d", n)

	_ = r.Close()
	require.NoError(t, w.SetWriteDeadline(time.Time{}))
	_, err = pw.Write([]byte("y"))
	assert.ErrorIs(t, err, syscall.EPIPE, "a write to a pipe nobody reads fails")
}
