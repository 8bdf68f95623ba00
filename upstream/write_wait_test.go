package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// A write that must wait for the write slot, held by a write into a full
// pipe, ends with its context's cause when its context ends (already
// ended, or while it waits), writes nothing, and leaves the slot to the
// writes after it, whose lines arrive whole.
func TestWriteWaitingForTheSlotEndsWithItsContext(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	c := &stdioConn{server: "t", stdin: w, pipe: pipeio.New(w), writeSlot: make(chan struct{}, 1), closed: make(chan struct{})}

	big := []byte(strings.Repeat("b", 1<<20) + "\n") // many pipes' worth: its write waits for the reader
	first := make(chan error, 1)
	go func() { first <- c.write(context.Background(), big) }()
	require.Eventually(t, func() bool { return len(c.writeSlot) == 1 }, waitTimeout, time.Millisecond, "the first write holds the slot")

	gone := errors.New("the caller gave up")
	ended, cancel := context.WithCancelCause(context.Background())
	cancel(gone)
	assert.ErrorIs(t, c.write(ended, []byte("ended\n")), gone)

	timeout := errors.New("the call's deadline passed")
	waiting, stop := context.WithTimeoutCause(context.Background(), 20*time.Millisecond, timeout)
	defer stop()
	assert.ErrorIs(t, c.write(waiting, []byte("waiting\n")), timeout)

	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	require.NoError(t, recvErr(t, first))
	require.NoError(t, c.write(context.Background(), []byte("after\n")))
	require.NoError(t, w.Close())
	got := <-read
	assert.True(t, bytes.Equal(append(big, "after\n"...), got), "the upstream read %d bytes, not the first line and the last whole", len(got))
}

func recvErr(t *testing.T, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("timed out")
		return nil
	}
}
