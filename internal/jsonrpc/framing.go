package jsonrpc

import (
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

// Reader reads newline-delimited messages, each up to a bound. It reads
// into a buffer of its own and finds the lines there, with no layer
// between it and the source.
type Reader struct {
	src io.Reader
	max int
	// buf[start:end] is read and not yet returned; scanned bytes of it
	// from start hold no newline.
	buf        []byte
	start, end int
	scanned    int
	err        error // the source's, once what buf holds is returned
	kept       bool  // ReadOwned returned a line of buf: buf[:end] is never written again
	empties    int   // reads in a row that returned nothing and no error
}

// readSize is the size of a Reader's first buffer, and of those it reads
// into after a long line: what a pipe holds.
const readSize = 64 << 10

// ownedSize is the size of each further buffer of a Reader whose lines
// are owned (ReadOwned): a line kept keeps its whole buffer from the
// collector, so it is small, and a read into it still takes a burst of
// requests at once.
const ownedSize = 8 << 10

// minRead is the least room a read gets before the buffer is compacted or
// replaced.
const minRead = 1 << 10

// NewReader returns a Reader of r whose messages are at most max bytes (0:
// DefaultMaxMessage).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	return &Reader{src: r, max: max}
}

// Read returns the next non-empty line without its terminator and the
// whitespace around it. The bytes are valid until the next Read. A line
// over the bound is skipped whole and reported as *TooLongError; reading
// may go on after it. At the end of the input Read returns io.EOF (after
// the last line, even one without a newline).
func (r *Reader) Read() ([]byte, error) { return r.read(false) }

// ReadOwned is Read for a caller that keeps the line: no later read
// changes its bytes, so that a message decoded from it may point into it
// without a copy (DecodeOwned). A line kept keeps the buffer it was read
// into (ownedSize, or the line's own size when larger) from the collector.
func (r *Reader) ReadOwned() ([]byte, error) { return r.read(true) }

func (r *Reader) read(own bool) ([]byte, error) {
	for {
		line, err := r.line()
		if err != nil {
			return nil, err
		}
		// The bound counts the line's bytes with room for a carriage
		// return, whatever the reads it came in (see line).
		raw := len(line)
		line = bytes.TrimSpace(line)
		if len(line) == 0 && raw <= r.max+1 {
			continue
		}
		if len(line) > r.max || raw > r.max+1 {
			return nil, &TooLongError{Limit: r.max, Size: int64(raw),
				Head: bytes.Clone(line[:min(len(line), keep)]),
				Tail: bytes.Clone(line[max(0, len(line)-keep):])}
		}
		if own {
			r.kept = true
		}
		// Capped at its end: a caller that appends to the line copies
		// it, rather than writing over the lines after it in buf.
		return line[:len(line):len(line)], nil
	}
}

// line returns the next line as it came, without its newline: the rest
// of the input at its end. It returns the source's error once the input
// holds no more, and *TooLongError for a line that grew past the bound
// before its end came (with room for a carriage return); that line's rest
// is dropped as it comes.
func (r *Reader) line() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.start+r.scanned:r.end], '\n'); i >= 0 {
			i += r.start + r.scanned
			line := r.buf[r.start:i]
			r.start, r.scanned = i+1, 0
			return line, nil
		}
		r.scanned = r.end - r.start
		if r.err != nil {
			if r.scanned == 0 {
				return nil, r.err
			}
			line := r.buf[r.start:r.end]
			r.start, r.scanned = r.end, 0
			return line, nil
		}
		if r.scanned > r.max+1 {
			return nil, r.skip()
		}
		r.fill()
	}
}

// fill reads once into the room after end, making room first.
func (r *Reader) fill() {
	pending := r.end - r.start
	switch {
	case r.buf == nil:
		r.buf = make([]byte, readSize)
	case len(r.buf) > readSize && pending+minRead <= readSize:
		// Grown for a long line, now read: no larger buffer is kept for
		// the small lines after it.
		r.renew(readSize)
	case len(r.buf)-r.end >= minRead:
	case r.kept:
		// The lines handed out stay as they are: the pending bytes move
		// to a new buffer.
		r.renew(max(ownedSize, 2*pending+minRead))
	case pending+minRead <= len(r.buf):
		copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, pending
	default:
		r.renew(2*pending + minRead) // a long line
	}
	n, err := r.src.Read(r.buf[r.end:])
	r.end += n
	switch {
	case err != nil:
		r.err = err
	case n == 0:
		if r.empties++; r.empties >= 100 {
			r.err = io.ErrNoProgress
		}
	default:
		r.empties = 0
	}
}

// renew moves the pending bytes to a new buffer of size bytes.
func (r *Reader) renew(size int) {
	buf := make([]byte, size)
	r.end = copy(buf, r.buf[r.start:r.end])
	r.buf, r.start, r.kept = buf, 0, false
}

// skip drops the rest of an oversized line, keeping its head and tail.
func (r *Reader) skip() error {
	pending := r.buf[r.start:r.end]
	e := &TooLongError{Limit: r.max, Head: bytes.Clone(pending[:min(len(pending), keep)])}
	tail := bytes.Clone(pending[max(0, len(pending)-keep):])
	e.Size = int64(len(pending))
	r.start, r.end, r.scanned = 0, 0, 0
	ended := false
	if !r.kept && len(r.buf) > readSize {
		r.buf = nil // do not keep a large buffer for the next small line
	}
	for {
		if r.buf == nil || r.kept {
			r.buf, r.kept = make([]byte, readSize), false
		}
		if r.err != nil {
			break
		}
		r.start, r.end = 0, 0
		r.fill()
		chunk := r.buf[:r.end]
		i := bytes.IndexByte(chunk, '\n')
		if i >= 0 {
			chunk = chunk[:i]
			r.start = i + 1
		} else {
			r.start = r.end
		}
		e.Size += int64(len(chunk))
		tail = append(tail, chunk...)
		if len(tail) > 2*keep {
			tail = append(tail[:0], tail[len(tail)-keep:]...)
		}
		if i >= 0 {
			ended = true
			break
		}
	}
	tail = bytes.TrimSpace(tail)
	e.Tail = bytes.Clone(tail[max(0, len(tail)-keep):])
	if !ended && !errors.Is(r.err, io.EOF) {
		return r.err // the input failed within the line
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
