package downstream

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trickle yields its data, then fails with err, as a body whose client
// stopped sending does at its read deadline.
type trickle struct {
	data []byte
	err  error
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestReadAtMostHoldsWhatArrivedNotWhatWasDeclared(t *testing.T) {
	const declared = 32 << 20
	var err error
	n := allocated(func() {
		_, err = readAtMost(&trickle{data: []byte("{"), err: os.ErrDeadlineExceeded}, declared)
	})
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Less(t, n, uint64(1<<20), "a body declared as %d bytes of which one arrived allocated %d bytes", declared, n)
}

func TestReadAtMostReadsWholeBodies(t *testing.T) {
	for _, size := range []int{0, 1, eagerBody, eagerBody + 1, 3*bodyChunk + 7, 2 << 20} {
		want := bytes.Repeat([]byte("x"), size)
		for _, declared := range []int64{int64(size), -1} {
			got, err := readAtMost(bytes.NewReader(want), declared)
			require.NoError(t, err, "size %d declared %d", size, declared)
			assert.True(t, bytes.Equal(want, got), "size %d declared %d: %d bytes back", size, declared, len(got))
		}
	}
}

func TestReadAtMostShortOrLongBodies(t *testing.T) {
	// Shorter than declared, small or large.
	for _, declared := range []int64{10, eagerBody + 10} {
		_, err := readAtMost(strings.NewReader("{}"), declared)
		assert.Error(t, err, "declared %d", declared)
	}
	// Longer than declared.
	_, err := readAtMost(strings.NewReader("{}x"), 2)
	assert.Error(t, err)
	// A failure after some bytes is the reader's own, not an end.
	_, err = readAtMost(&trickle{data: []byte("{}"), err: io.ErrUnexpectedEOF}, -1)
	assert.True(t, errors.Is(err, io.ErrUnexpectedEOF), "a truncated chunked body must not be taken as whole: %v", err)
}

func TestHTTPHeadersAreBounded(t *testing.T) {
	s := serveHTTP(t, newHTTPFake(), HTTPOptions{})
	status := func(size int) int {
		resp := s.post(t, initializeBody, map[string]string{"X-Padding": strings.Repeat("p", size)})
		defer resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, status(32<<10), "headers well within the bound")
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status(DefaultMaxHeaderBytes+8<<10))
	assert.Equal(t, http.StatusOK, status(16), "the server goes on")
}
