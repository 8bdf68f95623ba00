package jsonrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// DefaultMaxMessage bounds one newline-framed message unless a reader is
// given another bound.
const DefaultMaxMessage = 64 << 20

// TooLongError reports a line longer than the reader's bound. The line was
// read to its end and dropped; Head and Tail keep its first and last bytes so
// that the receiver can tell whose message it was (see OversizedID).
type TooLongError struct {
	Limit      int
	Size       int64
	Head, Tail []byte
}

// Error implements error.
func (e *TooLongError) Error() string {
	return fmt.Sprintf("a message of %d bytes or more exceeds the limit of %d bytes", e.Size, e.Limit)
}

// keep is how much of the head and tail of an oversized line is kept.
const keep = 4 << 10

// Reader reads newline-delimited messages, each up to a bound.
type Reader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewReader returns a Reader of r whose messages are at most max bytes (0:
// DefaultMaxMessage).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Read returns the next non-empty line without its terminator. The bytes are
// valid until the next Read. A line over the bound is skipped whole and
// reported as *TooLongError; reading may go on after it. At the end of the
// input Read returns io.EOF (after the last line, even one without a newline).
func (r *Reader) Read() ([]byte, error) {
	for {
		line, err := r.readLine()
		if len(line) > 0 || err != nil {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				return line, nil // the last line; EOF comes with the next Read
			}
			return line, err
		}
	}
}

func (r *Reader) readLine() ([]byte, error) {
	chunk, err := r.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		line := bytes.TrimSpace(chunk)
		if len(line) > r.max {
			return nil, &TooLongError{Limit: r.max, Size: int64(len(line)),
				Head: append([]byte(nil), line[:min(len(line), keep)]...),
				Tail: append([]byte(nil), line[max(0, len(line)-keep):]...)}
		}
		return line, err
	}
	r.buf = append(r.buf[:0], chunk...)
	for {
		chunk, err = r.r.ReadSlice('\n')
		if len(r.buf)+len(chunk) > r.max {
			return nil, r.skip(chunk, err)
		}
		r.buf = append(r.buf, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			line := bytes.TrimSpace(r.buf)
			if cap(r.buf) > 1<<20 {
				r.buf = nil // do not keep a large buffer for the next small line
			}
			return line, err
		}
	}
}

// skip drops the rest of an oversized line, keeping its head and tail.
func (r *Reader) skip(chunk []byte, err error) error {
	e := &TooLongError{Limit: r.max, Head: append([]byte(nil), r.buf[:min(len(r.buf), keep)]...)}
	e.Size = int64(len(r.buf))
	tail := append([]byte(nil), r.buf[max(0, len(r.buf)-keep):]...)
	r.buf = nil
	for {
		e.Size += int64(len(chunk))
		tail = append(tail, chunk...)
		if len(tail) > 2*keep {
			tail = append(tail[:0], tail[len(tail)-keep:]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		chunk, err = r.r.ReadSlice('\n')
	}
	if err == nil {
		e.Size-- // the newline
	}
	tail = bytes.TrimSpace(tail)
	e.Tail = append([]byte(nil), tail[max(0, len(tail)-keep):]...)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return e
}

// OversizedID finds the id of a message from the bytes kept of it: a
// top-level "id" member at the start (as most encoders write it) or at the
// end (as JavaScript peers that put the result first do).
func (e *TooLongError) OversizedID() []byte {
	if id := idAfter(e.Head, []byte(`{"jsonrpc":"2.0","id":`)); id != nil {
		return id
	}
	if id := idAfter(e.Head, []byte(`{"id":`)); id != nil {
		return id
	}
	tail := bytes.TrimSuffix(bytes.TrimSpace(e.Tail), []byte("}"))
	i := bytes.LastIndex(tail, []byte(`"id":`))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimSpace(tail[i+len(`"id":`):])
	if j := bytes.IndexByte(rest, ','); j >= 0 {
		rest = bytes.TrimSpace(rest[:j])
	}
	if ValidID(rest) {
		return rest
	}
	return nil
}

func idAfter(b, prefix []byte) []byte {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(b), prefix)
	if !ok {
		return nil
	}
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return nil
	}
	id := bytes.TrimSpace(rest[:end])
	if ValidID(id) {
		return id
	}
	return nil
}

// AppendRequestLine appends a request with an integer id and raw params
// (nil: none), and a newline, to b: what AppendLine makes of the same
// request, without building a Message or an id for it first.
func AppendRequestLine(b []byte, id int64, method string, params json.RawMessage) []byte {
	b = slices.Grow(b, 64+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":`...)
	b = rawjson.AppendString(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, "}\n"...)
}

// AppendLine appends m's encoding and a newline to b. It grows b at most
// once: appending member by member to a short b would reallocate it several
// times per message.
func AppendLine(b []byte, m *Message) []byte {
	b = slices.Grow(b, m.encodedSizeHint()+1)
	return append(m.Append(b), '\n')
}
