package upstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// readEvents reads every event of stream, handed out n bytes at a time,
// each event bounded to max bytes.
func readEvents(stream string, n, max int) ([]sseEvent, *sseCursor, error) {
	var cursor sseCursor
	r := newSSEReader(&chunked{data: []byte(stream), n: n}, max, &cursor)
	var events []sseEvent
	for {
		ev, err := r.next()
		if err != nil {
			return events, &cursor, err
		}
		events = append(events, ev)
	}
}

func TestSSEReaderEvents(t *testing.T) {
	stream := "retry: 100\n\n" + // a bare retry
		": comment\n\n" +
		"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" +
		"id: 2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\r\n\r\n" + // CRLF
		"event: endpoint\ndata: /message\n\n" +
		"data:first\ndata\ndata: third\n\n" + // no space; a field without a colon
		"id: a\x00b\ndata: x\n\n" + // an id with NUL is ignored
		"unknown: field\ndata: \n\n" + // empty data: no event, but the id counts
		"id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"roots/list\"}" // an event the stream ends in
	for _, n := range []int{1, 5, 4096} {
		events, cursor, err := readEvents(stream, n, 1<<10)
		require.ErrorIs(t, err, io.EOF)
		var got []string
		for _, ev := range events {
			got = append(got, ev.kind+"|"+string(ev.data))
		}
		assert.Equal(t, []string{
			`message|{"jsonrpc":"2.0","id":1,"result":{}}`,
			`|{"jsonrpc":"2.0","method":"n"}`,
			"endpoint|/message",
			"|first\n\nthird",
			"|x",
			`|{"jsonrpc":"2.0","id":"r","method":"roots/list"}`,
		}[:len(got)], got, "read %d bytes at a time", n)
		require.Len(t, got, 6)
		// The id of the event the stream ended in does not count: it was
		// never dispatched.
		assert.Equal(t, "2", cursor.lastID)
		assert.Equal(t, 100*time.Millisecond, cursor.retry)
		assert.True(t, cursor.hasRetry)
	}
}

// TestSSEReaderBound: no event, its comments included, may be over the
// bound, however it is split across reads; many events within it are fine.
func TestSSEReaderBound(t *testing.T) {
	event := func(n int) string { return "event: message\ndata: " + strings.Repeat("d", n) + "\n\n" }
	tests := []struct {
		name   string
		stream string
		over   bool
	}{
		{"many events, each within the limit", strings.Repeat(event(60), 50), false},
		{"blank lines with CRLF end events too", strings.Repeat(strings.ReplaceAll(event(60), "\n", "\r\n"), 50), false},
		{"one event over the limit", event(60) + event(120) + event(10), true},
		{"many data lines of one event add up", strings.Repeat("data: "+strings.Repeat("d", 30)+"\n", 5) + "\n", true},
		{"an endless line", "data: " + strings.Repeat("d", 1<<16), true},
		{"an endless comment", ":" + strings.Repeat("c", 1<<16) + "\n\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readEvents(tc.stream, 7, 100)
			if !tc.over {
				require.ErrorIs(t, err, io.EOF)
				return
			}
			var tooLong *jsonrpc.TooLongError
			require.ErrorAs(t, err, &tooLong)
			assert.Equal(t, 100, tooLong.Limit)
			assert.Greater(t, tooLong.Size, int64(100))
		})
	}
}

// TestSSEReaderResumesFromItsCursor: a reader given the cursor of a stream
// that ended keeps its last event id until an event of the new stream
// names another.
func TestSSEReaderResumesFromItsCursor(t *testing.T) {
	cursor := sseCursor{lastID: "ev-1"}
	r := newSSEReader(strings.NewReader("data: a\n\nid: ev-2\ndata: b\n\n"), 1<<10, &cursor)
	_, err := r.next()
	require.NoError(t, err)
	assert.Equal(t, "ev-1", cursor.lastID)
	_, err = r.next()
	require.NoError(t, err)
	assert.Equal(t, "ev-2", cursor.lastID)
}

// TestStreamedBatchIsTakenMessageByMessage: an event that carries a
// JSON-RPC batch is taken message by message, as if each had come alone; a
// batch inside it, or one that is not JSON, is refused, saying why.
func TestStreamedBatchIsTakenMessageByMessage(t *testing.T) {
	stream := "id: 7\ndata: [{\"jsonrpc\":\"2.0\",\"method\":\"n\"},{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"roots/list\"},[1],{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":1,\"message\":\"m\"}}]\n\n" +
		"event: other\ndata: [{\"jsonrpc\":\"2.0\",\"method\":\"o\"}]\n\n" + // not a message event
		"data: [\ndata: 1\n\n" + // not JSON, over several lines
		"data: [\"x\"\n\n" // not JSON, on one line
	rec := newLogRecorder()
	c := &remoteConn{server: "s", log: rec.Logger()}
	events, _, err := readEvents(stream, 7, 1<<10)
	require.ErrorIs(t, err, io.EOF)
	var got []string
	for _, ev := range events {
		data := messageData(ev)
		if data == nil {
			got = append(got, "skipped "+ev.kind)
			continue
		}
		err := c.unpack(data, func(raw []byte, m *jsonrpc.Message, err error) {
			switch {
			case m == nil:
				got = append(got, "unreadable "+err.Error())
			case m.IsNotification():
				got = append(got, "notification "+m.Method)
			case m.IsRequest():
				got = append(got, "request "+string(m.ID)+" "+m.Method)
			default:
				got = append(got, "response "+string(raw))
			}
		})
		if err != nil {
			got = append(got, "refused "+err.Error())
		}
	}
	assert.Equal(t, []string{
		"notification n",
		`response {"jsonrpc":"2.0","id":1,"result":{}}`,
		`request "r" roots/list`,
		`response {"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`,
		"skipped other",
		"skipped ", // lines that are not JSON do not make one
		"refused unexpected end of JSON input",
	}, got)
	assert.True(t, rec.Has("a batch inside a batch"), "the nested batch is named in the log")
}

// FuzzSSEReader: whatever a stream holds, the reader ends it with io.EOF
// or the bound's error, reads it the same however its bytes are split
// across reads, never hands out an event over the bound, and keeps a
// cursor it can send back (no NUL, no negative retry).
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("id: 1\nretry: 10\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"), 5)
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{\"a\":[1,\n\n"), 1)
	f.Add([]byte(": comment\r\nid: a\x00b\r\ndata:{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":1}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":1,\"message\":\"m\"}}"), 3)
	f.Add([]byte("data: {\"method\":\"notifications/x\"}\n\nretry: 99999999999\n\n"), 2)
	f.Add([]byte("data: "+strings.Repeat("x", 300)+"\n\n"), 64)
	const max = 256
	f.Fuzz(func(t *testing.T, stream []byte, n int) {
		n = 1 + int(uint(n)%512)
		whole, wholeCursor, wholeErr := readEvents(string(stream), len(stream)+1, max)
		split, splitCursor, splitErr := readEvents(string(stream), n, max)
		var tooLong *jsonrpc.TooLongError
		if !errors.Is(wholeErr, io.EOF) && !errors.As(wholeErr, &tooLong) {
			t.Fatalf("a stream read whole ended with %v", wholeErr)
		}
		require.Equal(t, wholeErr, splitErr, "split into reads of %d bytes", n)
		require.Equal(t, whole, split, "split into reads of %d bytes", n)
		require.Equal(t, wholeCursor, splitCursor)
		for _, ev := range whole {
			require.NotEmpty(t, ev.data)
			require.LessOrEqual(t, len(ev.data), max)
			if data := messageData(ev); data != nil {
				require.False(t, bytes.ContainsAny(data, "\r\n"), "a message is one line")
			}
		}
		require.NotContains(t, wholeCursor.lastID, "\x00")
		require.GreaterOrEqual(t, wholeCursor.retry, time.Duration(0))
	})
}
