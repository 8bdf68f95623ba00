//go:build unix

package upstream

import (
	"bytes"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The write that does not wait takes what the pipe has room for and never
// blocks: not on a full pipe, not when a deadline of an earlier write has
// passed, and never on a descriptor in blocking mode.
func TestQuickWriteNeverWaits(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	q := newQuickWriter(w)
	require.NotNil(t, q.raw, "os.Pipe gives a non-blocking pipe")

	assert.Equal(t, 5, q.write([]byte("hello")), "a pipe with room takes it all")
	got := make([]byte, 5)
	_, err = io.ReadFull(r, got)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))

	// An earlier write's deadline has passed: nothing is written here, so
	// that the waiting write, which sets its own deadline, does it.
	require.NoError(t, w.SetWriteDeadline(time.Unix(1, 0)))
	assert.Equal(t, 0, q.write([]byte("x")))
	require.NoError(t, w.SetWriteDeadline(time.Time{}))

	// A full pipe: part of a large message, then nothing, without blocking.
	big := bytes.Repeat([]byte("y"), 1<<20)
	n := q.write(big)
	assert.True(t, n > 0 && n < len(big), "a message larger than the pipe goes in part (%d bytes)", n)
	assert.Equal(t, 0, q.write([]byte("z")), "a full pipe takes nothing")
	assert.Equal(t, 0, q.write(nil))
}

func TestQuickWriteSkipsBlockingDescriptors(t *testing.T) {
	t.Parallel()
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	// os.NewFile keeps a descriptor in blocking mode as it is.
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	defer w.Close()
	q := newQuickWriter(w)
	assert.Nil(t, q.raw, "a blocking descriptor gets no write without a deadline")
	assert.Equal(t, 0, q.write([]byte("hello")))
}
