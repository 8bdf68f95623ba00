package downstream

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

func numbered(i int) *jsonrpc.Message {
	return &jsonrpc.Message{Method: "n", Params: json.RawMessage(itoa(i))}
}

// The outbox keeps order, holds at most its limit (dropping, or closing
// when it is a GET stream's), and gives the writer, after close, every
// message it accepted.
func TestOutboxBoundsAndOrder(t *testing.T) {
	q := newOutbox(3, false)
	for i := range 4 {
		assert.Equal(t, i < 3, q.offer(numbered(i)), "message %d", i)
	}
	assert.Equal(t, "0", string(q.take().Params))
	assert.True(t, q.offer(numbered(4)), "room again once one is taken")
	q.close()
	assert.False(t, q.offer(numbered(5)), "nothing is accepted once closed")
	var got []string
	for m := q.take(); m != nil; m = q.take() {
		got = append(got, string(m.Params))
	}
	assert.Equal(t, []string{"1", "2", "4"}, got)

	g := newOutbox(2, true)
	require.True(t, g.offer(numbered(0)))
	require.True(t, g.offer(numbered(1)))
	assert.False(t, g.offer(numbered(2)))
	select {
	case <-g.done:
	default:
		t.Fatal("a full GET stream's outbox closes")
	}
}

// Offers from many goroutines against one writer that waits on wake: no
// accepted message is lost or taken twice, and none waits unseen.
func TestOutboxWakesItsWriter(t *testing.T) {
	const producers, each = 8, 500
	q := newOutbox(producers*each, false)
	seen := make(map[string]bool)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for len(seen) < producers*each {
			<-q.wake
			for m := q.take(); m != nil; m = q.take() {
				key := string(m.Params)
				assert.False(t, seen[key], "taken twice: %s", key)
				seen[key] = true
			}
		}
	}()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				assert.True(t, q.offer(numbered(p*each+i)))
			}
		}()
	}
	wg.Wait()
	<-finished
	assert.Len(t, seen, producers*each)
}

// The queues of both transports bound what waits in bytes as well as in
// messages: past maxQueuedBytes a message is refused (a GET stream's
// outbox closes), one message alone is taken whatever its size, and
// responses on stdio are never refused.
func TestQueuesBoundTheirBytes(t *testing.T) {
	big := func() *jsonrpc.Message {
		return &jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`"` + strings.Repeat("x", maxQueuedBytes/4) + `"`)}
	}
	huge := &jsonrpc.Message{Method: "notifications/progress", Params: json.RawMessage(`"` + strings.Repeat("x", 2*maxQueuedBytes) + `"`)}

	q := newOutbox(256, false)
	for i := range 4 {
		assert.Equal(t, i < 3, q.offer(big()), "message %d of a quarter of the bound", i)
	}
	assert.False(t, q.offer(huge))
	for q.take() != nil {
	}
	assert.True(t, q.offer(huge), "one message alone is taken whatever its size")
	assert.False(t, q.offer(numbered(1)))
	require.NotNil(t, q.take())
	assert.True(t, q.offer(numbered(1)), "its bytes are free again once taken")

	g := newOutbox(256, true)
	require.True(t, g.offer(huge))
	assert.False(t, g.offer(big()))
	select {
	case <-g.done:
	default:
		t.Fatal("a GET stream's outbox past its bytes closes")
	}

	lq := newLineQueue(1024)
	for i := range 4 {
		assert.Equal(t, i < 3, lq.push(big().Encode(), false), "line %d of a quarter of the bound", i)
	}
	assert.True(t, lq.push(big().Encode(), true), "a response is never refused")
	assert.Equal(t, 1, lq.dropped)
}
