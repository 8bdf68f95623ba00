//go:build unix

package pipeio

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpPair is a connected pair of TCP connections on the loopback.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() { _, _ = client.Close(), server.Close() })
	return client, server
}

// A connection of the poller is read and written directly, and its errors
// are those net/http looks for: io.EOF at the end, a net.Error that is a
// timeout when a deadline passes, net.ErrClosed once closed.
func TestConnBehavesAsTheNetPackagesOwn(t *testing.T) {
	t.Parallel()
	rawClient, rawServer := tcpPair(t)
	c, s := NewConn(rawClient), NewConn(rawServer)
	require.IsType(t, &conn{}, c, "a TCP connection is read directly")
	assert.Equal(t, rawClient.RemoteAddr(), c.RemoteAddr())

	n, err := c.Write([]byte("ping\n"))
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	buf := make([]byte, 16)
	n, err = s.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "ping\n", string(buf[:n]))

	require.NoError(t, s.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err = s.Read(buf)
	var ne net.Error
	require.True(t, errors.As(err, &ne), "%T: %v", err, err)
	assert.True(t, ne.Timeout())
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var op *net.OpError
	require.True(t, errors.As(err, &op))
	assert.Equal(t, "read", op.Op)
	assert.Equal(t, "tcp", op.Net)
	require.NoError(t, s.SetReadDeadline(time.Time{}))

	// A large write waits for the reader, and arrives whole.
	big := make([]byte, 8<<20)
	got := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, io.LimitReader(s, int64(len(big))))
		got <- n
	}()
	n, err = c.Write(big)
	require.NoError(t, err)
	assert.Equal(t, len(big), n)
	assert.EqualValues(t, len(big), <-got)

	// The peer closes: io.EOF, unwrapped, as net's own Read returns it.
	require.NoError(t, c.Close())
	_, err = s.Read(buf)
	assert.Equal(t, io.EOF, err)

	_, err = c.Read(buf)
	assert.ErrorIs(t, err, net.ErrClosed)
	_, err = c.Write([]byte("x"))
	assert.ErrorIs(t, err, net.ErrClosed)

	// A read blocked in the poller ends when the connection is closed.
	rawA, rawB := tcpPair(t)
	a := NewConn(rawA)
	_ = rawB
	ended := make(chan error, 1)
	go func() { _, err := a.Read(buf); ended <- err }()
	require.NoError(t, a.Close())
	assert.ErrorIs(t, <-ended, net.ErrClosed)
}

// A connection outside the poller is returned as it is.
func TestConnOutsideThePollerIsLeftAlone(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.Equal(t, a, NewConn(a))
}
