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

// A caller that appends to a line from ReadOwned (as encoders appending to
// a message's raw members do) gets a copy: the lines after it, read or not
// yet read, keep their bytes.
func TestReadOwnedLineAppendLeavesTheNextLines(t *testing.T) {
	r := NewReader(strings.NewReader("{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n"), 0)
	first, err := r.ReadOwned()
	require.NoError(t, err)
	second, err := r.ReadOwned()
	require.NoError(t, err)
	_ = append(first, `,"x":"overwritten"`...)
	assert.Equal(t, `{"id":2}`, string(second), "a line already read")
	third, err := r.ReadOwned()
	require.NoError(t, err)
	assert.Equal(t, `{"id":3}`, string(third), "a line not yet read")
}

// Lines from ReadOwned keep their bytes whatever comes after them: lines
// longer than the buffer, a line cut into many reads, a line of exactly a
// buffer's size, an oversized line, CRLF, blank lines, the shrink after a
// long line and a last line without a newline.
func TestReadOwnedLinesKeepTheirBytes(t *testing.T) {
	const limit = 3 * readSize
	exact := `{"id":"exact","p":"` + strings.Repeat("e", readSize-len(`{"id":"exact","p":""}`)) + `"}`
	require.Len(t, exact, readSize)
	atLimit := `{"id":"limit","p":"` + strings.Repeat("l", limit-len(`{"id":"limit","p":""}`)) + `"}`
	require.Len(t, atLimit, limit)
	lines := []string{
		`{"id":1,"params":{"a":"one"}}`,
		`{"id":"long","p":"` + strings.Repeat("x", 2*readSize) + `"}`,
		`{"id":2}`,
		exact,
		`{"id":3}`,
		atLimit,
		`{"id":4}`,
	}
	var in bytes.Buffer
	for i, l := range lines {
		in.WriteString(l)
		if i%2 == 0 {
			in.WriteString("\r\n\n   \n")
		} else {
			in.WriteString("\n")
		}
	}
	over := `{"jsonrpc":"2.0","id":99,"p":"` + strings.Repeat("o", limit) + `"}`
	in.WriteString(over + "\r\n")
	in.WriteString(`{"id":"after-over"}` + "\n")
	in.WriteString(`{"id":"last"}`) // no newline
	want := append(append([]string{}, lines...), "", `{"id":"after-over"}`, `{"id":"last"}`)

	for _, size := range []int{1, 7, minRead - 1, readSize + 3, in.Len()} {
		r := NewReader(&chunkedReader{data: bytes.Clone(in.Bytes()), sizes: sizesOf(size)}, limit)
		var got [][]byte
		var copies []string
		for {
			line, err := r.ReadOwned()
			if errors.Is(err, io.EOF) {
				break
			}
			var tl *TooLongError
			if errors.As(err, &tl) {
				assert.Equal(t, "99", string(tl.OversizedID()), "reads of %d", size)
				assert.Equal(t, int64(len(over)+1), tl.Size, "reads of %d: the carriage return counts", size)
				got, copies = append(got, nil), append(copies, "")
				continue
			}
			require.NoError(t, err)
			got, copies = append(got, line), append(copies, string(line))
		}
		require.Equal(t, want, copies, "reads of %d", size)
		for i, line := range got {
			assert.Equal(t, copies[i], string(line), "reads of %d: line %d changed after later reads", size, i)
		}
		assert.LessOrEqual(t, len(r.buf), readSize, "reads of %d: no buffer grown for a long line is kept", size)
	}
}

// sizesOf is a chunkedReader's sizes for reads of n bytes each.
func sizesOf(n int) []byte {
	if n < 256 {
		return []byte{byte(n)}
	}
	return nil // as much as fits
}

// A member of a message decoded in place is capped at its end: appending
// to one (params, say) leaves the members after it in the line as they
// were.
func TestDecodeBorrowedMembersAreCapped(t *testing.T) {
	var m Message
	require.NoError(t, DecodeBorrowed(&m, []byte(`{"jsonrpc":"2.0","method":"m","params":{"a":1},"id":5}`)))
	_ = append(m.Params, `,"b":2222`...)
	assert.Equal(t, `5`, string(m.ID))
	var r Message
	require.NoError(t, DecodeBorrowed(&r, []byte(`{"jsonrpc":"2.0","id":"r-1","result":{"ok":true},"x":0}`)))
	_ = append(r.ID, `xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`...)
	assert.Equal(t, `{"ok":true}`, string(r.Result))
}
