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
