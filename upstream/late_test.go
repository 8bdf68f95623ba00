package upstream

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// TestLateAnswerIsToldApartFromAnUnknownID: the answer to a request the
// aggregator gave up on (its caller cancelled) is logged as a late answer at
// debug level, not as an answer to an id never sent; an id that was really
// never sent still is.
func TestLateAnswerIsToldApartFromAnUnknownID(t *testing.T) {
	rec := newLogRecorder()
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = stdinR.Close(), stdinW.Close() })
	life, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	c := &stdioConn{server: "late", log: rec.Logger(), stdin: stdinW, writeSlot: make(chan struct{}, 1), pipe: pipeio.New(stdinW),
		pending: map[int64]waiter{}, notices: newSlots(maxNotices), life: life, closed: make(chan struct{})}
	upstreamIn := jsonrpc.NewReader(stdinR, 1<<20)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.call(ctx, "tools/call", json.RawMessage(`{"name":"slow"}`))
		done <- err
	}()
	line, err := upstreamIn.Read()
	require.NoError(t, err)
	req, err := jsonrpc.Decode(line)
	require.NoError(t, err)
	require.Equal(t, "tools/call", req.Method)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	line, err = upstreamIn.Read()
	require.NoError(t, err)
	notice, err := jsonrpc.Decode(line)
	require.NoError(t, err)
	require.Equal(t, "notifications/cancelled", notice.Method, "the upstream is told the request was given up")

	answer := func(id json.RawMessage) []byte {
		return jsonrpc.AppendLine(nil, &jsonrpc.Message{ID: id, Result: json.RawMessage(`{"content":[]}`)})
	}
	c.dispatch(answer(req.ID))
	late := rec.WaitFor(t, "after the aggregator gave up on it")
	assert.True(t, strings.HasPrefix(late, "DEBUG "), late)
	assert.Contains(t, late, "server=late")
	assert.Contains(t, late, "id="+string(req.ID))

	c.dispatch(answer(json.RawMessage(`99`)))
	unknown := rec.WaitFor(t, "never sent")
	assert.True(t, strings.HasPrefix(unknown, "WARN "), unknown)
	assert.Contains(t, unknown, "id=99")
	c.dispatch(answer(req.ID))
	var never []string
	for _, l := range rec.Lines() {
		if strings.Contains(l, "never sent") {
			never = append(never, l)
		}
	}
	assert.Len(t, never, 2, "the late answer was taken for an unknown id, or a second answer to it was not: %q", never)
	assert.Contains(t, never[len(never)-1], "id="+string(req.ID), "a second answer to the same id is no longer late")
}

// TestAbandonedIDsAreBounded: only the most recent maxAbandoned ids given
// up on are remembered.
func TestAbandonedIDsAreBounded(t *testing.T) {
	var a abandonedIDs
	for i := range maxAbandoned + 1 {
		a.add(int64(i + 1))
	}
	assert.Len(t, a.set, maxAbandoned)
	assert.False(t, a.take(1), "the oldest is forgotten")
	assert.True(t, a.take(2))
	assert.True(t, a.take(maxAbandoned+1))
	assert.False(t, a.take(maxAbandoned+1), "an id is late once")
}

// TestSentID: only a positive integer written as one can be an id the
// connection sent; a string, a fraction or a sign never matches a call.
func TestSentID(t *testing.T) {
	for raw, want := range map[string]int64{"1": 1, "42": 42, "999999999999999999": 999999999999999999} {
		got, ok := sentID(json.RawMessage(raw))
		assert.True(t, ok, raw)
		assert.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"", "0", "01", `"1"`, "-1", "1.0", "1e3", "null", "9999999999999999999", " 1"} {
		_, ok := sentID(json.RawMessage(raw))
		assert.False(t, ok, raw)
	}
}
