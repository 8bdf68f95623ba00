package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// An event stream (text/event-stream) of a remote upstream, read as the
// HTML standard's server-sent events have it: a line ends at "\n" (a "\r"
// before it is dropped), a field is "name: value" (one space after the
// colon dropped), a line starting with ":" is a comment, and an event ends
// at a blank line; its data lines are joined with "\n", and its id becomes
// the stream's last event id once it is dispatched. An event without data
// is not dispatched, but its id and retry still count.
//
// The reader is bounded: no event (its lines, comments included) may be
// over max bytes, so that an endless line or event fails with a
// *jsonrpc.TooLongError instead of growing a buffer until memory runs out.

// sseCursor is what resuming a stream needs: the id of the last event
// dispatched, and the reconnection time the upstream asked for.
type sseCursor struct {
	lastID   string
	retry    time.Duration
	hasRetry bool
}

// sseEvent is one dispatched event.
type sseEvent struct {
	kind string // the event type; "" for the default, "message"
	data []byte // a buffer of its own
}

// sseReader reads the events of one stream. It is not safe for concurrent
// use.
type sseReader struct {
	src    *bufio.Reader
	max    int
	used   int // bytes of the event under way
	cursor *sseCursor

	idBuf   string // the last event id buffer, dispatched with the event
	kind    string
	data    []byte
	hasData bool
	err     error // sticky: the stream is over
}

// newSSEReader reads r with each event bounded to max bytes, keeping
// cursor up to date (nil: a cursor of its own). A cursor carried over from
// a stream that ended starts the next one where it left off.
func newSSEReader(r io.Reader, max int, cursor *sseCursor) *sseReader {
	if cursor == nil {
		cursor = &sseCursor{}
	}
	return &sseReader{src: bufio.NewReader(r), max: max, cursor: cursor, idBuf: cursor.lastID}
}

// next returns the next event that has data. It returns io.EOF when the
// stream ends, a *jsonrpc.TooLongError when an event is over the bound, or
// the error reading the stream failed with; and that same error ever after.
// An event the stream ends in the middle of is still returned, as most
// clients take it, but its id does not count.
func (s *sseReader) next() (sseEvent, error) {
	for s.err == nil {
		line, err := s.line()
		switch {
		case err == io.EOF:
			s.err = err
			if len(line) > 0 {
				s.field(line)
			}
			if ev, ok := s.take(); ok {
				return ev, nil
			}
		case err != nil:
			s.err = err
		case len(line) == 0:
			s.used = 0
			s.cursor.lastID = s.idBuf
			if ev, ok := s.take(); ok {
				return ev, nil
			}
		default:
			s.field(line)
		}
	}
	return sseEvent{}, s.err
}

// take ends the event under way and returns it if it has data.
func (s *sseReader) take() (sseEvent, bool) {
	ev := sseEvent{kind: s.kind, data: s.data}
	ok := s.hasData && len(s.data) > 0
	s.kind, s.data, s.hasData = "", nil, false
	return ev, ok
}

// line reads one line, without its terminator. At the end of the stream it
// returns what is left, unterminated, with io.EOF.
func (s *sseReader) line() ([]byte, error) {
	var whole []byte
	for {
		chunk, err := s.src.ReadSlice('\n')
		s.used += len(chunk)
		if err == nil {
			s.used-- // the terminator is not the event's
		}
		if s.used > s.max {
			return nil, &jsonrpc.TooLongError{Limit: s.max, Size: int64(s.used)}
		}
		if err == bufio.ErrBufferFull {
			whole = append(whole, chunk...)
			continue
		}
		if whole != nil {
			chunk = append(whole, chunk...)
		}
		chunk = bytes.TrimSuffix(chunk, []byte{'\n'})
		chunk = bytes.TrimSuffix(chunk, []byte{'\r'})
		return chunk, err
	}
}

// field takes one line of an event.
func (s *sseReader) field(line []byte) {
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(name) == 0 {
		return // a comment
	}
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(name) {
	case "event":
		s.kind = string(bytes.TrimSpace(value))
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.idBuf = string(value)
		}
	case "retry":
		if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil && len(bytes.Trim(value, "0123456789")) == 0 {
			s.cursor.retry, s.cursor.hasRetry = time.Duration(ms)*time.Millisecond, true
		}
	}
}

// messageData is an event's data as one JSON-RPC message (or batch) on one
// line, valid UTF-8, or nil when it is an event of another type. A message
// over several data lines is made one line again, so that it can go on down
// a newline-framed stream; such data that is not JSON is nil.
func messageData(ev sseEvent) []byte {
	if len(ev.data) == 0 || (ev.kind != "" && ev.kind != "message") {
		return nil
	}
	data := validText(ev.data)
	if bytes.ContainsAny(data, "\r\n") {
		var b bytes.Buffer
		if json.Compact(&b, data) != nil {
			return nil
		}
		data = b.Bytes()
	}
	return data
}
