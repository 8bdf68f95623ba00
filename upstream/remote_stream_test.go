package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoteGETStreamReconnectsFromTheLastEvent: a GET stream the upstream
// ends is opened again after the time its retry field names, with the id
// of the last event it dispatched in Last-Event-ID, and the session and
// protocol version on every attempt; what the upstream replays from there
// arrives, raw, and nothing twice.
func TestRemoteGETStreamReconnectsFromTheLastEvent(t *testing.T) {
	t.Parallel()
	note := func(n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"n":%d,"big":%s}}}`, n, big)
	}
	var mu sync.Mutex
	var gets []http.Header
	f := &sessionRemote{get: func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gets = append(gets, r.Header.Clone())
		attempt := len(gets)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		switch attempt {
		case 1:
			// Two events, a comment, then the stream ends after an event
			// without an id: the cursor stays on the last one that had one.
			_, _ = fmt.Fprintf(w, "retry: 10\nid: g-1\ndata: %s\n\n: keep-alive\n\nid: g-2\ndata: %s\n\ndata: %s\n\n", note(1), note(2), note(3))
		case 2:
			// The upstream replays from g-2 on, then ends the stream again.
			_, _ = fmt.Fprintf(w, "id: g-4\ndata: %s\n\n", note(4))
		default:
			_, _ = fmt.Fprintf(w, "id: g-5\ndata: %s\n\n", note(5))
			w.(http.Flusher).Flush()
			<-r.Context().Done() // stays open until the connection ends
		}
	}}
	log := newNotificationLog()
	startSessionRemote(t, f, nil, Options{OnNotification: log.add})
	got := log.waitLen(t, 5)
	for i, n := range got {
		assert.Equal(t, Notification{Method: "notifications/message",
			Params: json.RawMessage(fmt.Sprintf(`{"level":"info","data":{"n":%d,"big":%s}}`, i+1, big))}, n)
	}

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(gets), 3)
	for i, want := range []string{"", "g-2", "g-4"} {
		h := gets[i]
		assert.Equal(t, want, h.Get("Last-Event-ID"), "GET %d", i+1)
		assert.Equal(t, "session-1", h.Get("Mcp-Session-Id"), "GET %d", i+1)
		assert.Equal(t, "2025-11-25", h.Get("Mcp-Protocol-Version"), "GET %d", i+1)
		assert.Equal(t, "text/event-stream", h.Get("Accept"), "GET %d", i+1)
	}
	assert.Len(t, gets, 3, "the open stream is not asked for again")
}
