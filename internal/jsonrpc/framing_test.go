package jsonrpc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReaderLines(t *testing.T) {
	r := NewReader(strings.NewReader("a\r\n\n  \nb\nlast"), 0)
	var got []string
	for {
		line, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, string(line))
	}
	assert.Equal(t, []string{"a", "b", "last"}, got)
}

func TestReaderOversizedLineIsSkippedAndIdentified(t *testing.T) {
	const limit = 1 << 16
	big := `{"jsonrpc":"2.0","id":42,"result":{"text":"` + strings.Repeat("x", 3*limit) + `"}}`
	jsFirst := `{"result":{"text":"` + strings.Repeat("y", 3*limit) + `"},"jsonrpc":"2.0","id":"q-7"}`
	r := NewReader(strings.NewReader(big+"\n"+jsFirst+"\nsmall\n"), limit)

	_, err := r.Read()
	var tl *TooLongError
	require.True(t, errors.As(err, &tl), "got %v", err)
	assert.Equal(t, int64(len(big)), tl.Size)
	assert.Equal(t, "42", string(tl.OversizedID()))
	assert.LessOrEqual(t, len(tl.Head)+len(tl.Tail), 2*keep, "only the ends are kept")

	_, err = r.Read()
	require.True(t, errors.As(err, &tl), "got %v", err)
	assert.Equal(t, `"q-7"`, string(tl.OversizedID()))

	line, err := r.Read()
	require.NoError(t, err)
	assert.Equal(t, "small", string(line), "reading goes on after an oversized line")
}

// FuzzReader: whatever the input, lines come back without newlines, within
// the bound, and reading ends.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{}\n{}\r\n"), 8)
	f.Add([]byte(strings.Repeat("z", 100)+"\nok\n"), 16)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if limit < 1 || limit > 1<<12 {
			return
		}
		r := NewReader(bytes.NewReader(data), limit)
		for i := 0; i <= len(data)+1; i++ {
			line, err := r.Read()
			var tl *TooLongError
			switch {
			case errors.Is(err, io.EOF):
				return
			case errors.As(err, &tl):
				continue
			case err != nil:
				t.Fatal(err)
			}
			if len(line) > limit || bytes.ContainsAny(line, "\n") || len(line) == 0 {
				t.Fatalf("bad line %q (limit %d)", line, limit)
			}
		}
		t.Fatal("reading did not end")
	})
}

// chunkedReader returns its data in reads of the sizes it is given, in
// turn (0: a read that returns nothing).
type chunkedReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkedReader) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])
		c.i++
	}
	n = min(n, len(b), len(c.data))
	copy(b, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// FuzzReaderLines: whatever the input and however it is cut into reads,
// the lines are the input's non-blank lines, trimmed, each of them too
// long exactly when it is over the bound (with room for a carriage
// return), and a line from ReadOwned keeps its bytes through later reads.
func FuzzReaderLines(f *testing.F) {
	f.Add([]byte("{}\n{}\r\n \n\n"), []byte{1, 3}, []byte{0, 1}, 8)
	f.Add([]byte(strings.Repeat("z", 100)+"\nok\n  "+strings.Repeat("w", 9)+"  \nlast"), []byte{7, 0, 64}, []byte{1}, 9)
	f.Fuzz(func(t *testing.T, data, sizes, owned []byte, limit int) {
		if limit < 1 || limit > 1<<12 || len(sizes) > 64 { // fewer than 100 empty reads in a row
			return
		}
		if bytes.Count(sizes, []byte{0}) == len(sizes) && len(sizes) > 0 {
			return // no read would ever return anything
		}
		var want []string // "" for a line too long
		for _, line := range bytes.Split(data, []byte("\n")) {
			trimmed := bytes.TrimSpace(line)
			switch {
			case len(trimmed) > limit || len(line) > limit+1:
				want = append(want, "")
			case len(trimmed) > 0:
				want = append(want, string(trimmed))
			}
		}
		r := NewReader(&chunkedReader{data: data, sizes: sizes}, limit)
		type kept struct {
			line []byte
			was  string
		}
		var got []string
		var keep []kept
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatal("reading did not end")
			}
			own := len(owned) > 0 && owned[i%len(owned)]&1 == 1
			var line []byte
			var err error
			if own {
				line, err = r.ReadOwned()
			} else {
				line, err = r.Read()
			}
			var tl *TooLongError
			switch {
			case errors.Is(err, io.EOF):
			case errors.As(err, &tl):
				got = append(got, "")
				continue
			case err != nil:
				t.Fatal(err)
			default:
				got = append(got, string(line))
				if own {
					keep = append(keep, kept{line, string(line)})
				}
				continue
			}
			break
		}
		assert.Equal(t, want, got)
		for _, k := range keep {
			require.Equal(t, k.was, string(k.line), "a line from ReadOwned changed")
		}
	})
}

// repeatReader returns block on every read.
type repeatReader struct{ block []byte }

func (r repeatReader) Read(b []byte) (int, error) { return copy(b, r.block), nil }

// BenchmarkReader is one request line read from a source that gives
// sixteen in each read, as a client with sixteen calls in flight does.
func BenchmarkReader(b *testing.B) {
	line := `{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}` + "\n"
	src := repeatReader{[]byte(strings.Repeat(line, 16))}
	b.Run("Read", func(b *testing.B) {
		r := NewReader(src, 0)
		for b.Loop() {
			if _, err := r.Read(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadOwned", func(b *testing.B) {
		r := NewReader(src, 0)
		for b.Loop() {
			if _, err := r.ReadOwned(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Read+Clone", func(b *testing.B) {
		r := NewReader(src, 0)
		for b.Loop() {
			line, err := r.Read()
			if err != nil {
				b.Fatal(err)
			}
			_ = bytes.Clone(line)
		}
	})
}

// A buffer grown for a long line is not kept for the small lines after it.
func TestReaderDropsBufferGrownForALongLine(t *testing.T) {
	big := strings.Repeat("b", 1<<20)
	r := NewReader(io.MultiReader(strings.NewReader(big+"\n"), strings.NewReader("small\n")), 0)
	line, err := r.Read()
	require.NoError(t, err)
	require.Len(t, line, len(big))
	require.Greater(t, len(r.buf), readSize)
	line, err = r.Read()
	require.NoError(t, err)
	assert.Equal(t, "small", string(line))
	assert.Equal(t, readSize, len(r.buf))
}
