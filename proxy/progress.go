package proxy

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// mcp-go queues notifications apart from responses, so a call's last
// progress notification could reach the wire after its result, where
// clients drop it. The call handler therefore counts the progress it sends
// per progress token, the edge writers count what actually went out, and
// the handler returns its result only once the two agree (or a short bound
// passes).

// progressFlushWait bounds the wait for queued progress to be written.
const progressFlushWait = time.Second

type progressCount struct {
	sent, written int
	caughtUp      chan struct{} // non-nil while the handler waits
}

// progressTracker matches sent and written progress by token.
type progressTracker struct {
	mu     sync.Mutex
	counts map[string]*progressCount
}

func newProgressTracker() *progressTracker {
	return &progressTracker{counts: map[string]*progressCount{}}
}

func (t *progressTracker) begin(token string) {
	t.mu.Lock()
	if t.counts[token] == nil {
		t.counts[token] = &progressCount{}
	}
	t.mu.Unlock()
}

func (t *progressTracker) sent(token string) {
	t.mu.Lock()
	if c := t.counts[token]; c != nil {
		c.sent++
	}
	t.mu.Unlock()
}

var progressMethod = []byte(`"notifications/progress"`)

// observe is called by the edge writers with every message they write.
func (t *progressTracker) observe(msg []byte) {
	if !bytes.Contains(msg, progressMethod) {
		return
	}
	var n struct {
		Params struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil {
		return
	}
	t.mu.Lock()
	if c := t.counts[string(n.Params.Token)]; c != nil {
		c.written++
		if c.caughtUp != nil && c.written >= c.sent {
			close(c.caughtUp)
			c.caughtUp = nil
		}
	}
	t.mu.Unlock()
}

// finish waits until every progress notification sent under token has been
// written, then forgets the token.
func (t *progressTracker) finish(token string) {
	t.mu.Lock()
	c := t.counts[token]
	var wait chan struct{}
	if c != nil && c.written < c.sent {
		wait = make(chan struct{})
		c.caughtUp = wait
	}
	t.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-time.After(progressFlushWait):
		}
	}
	t.mu.Lock()
	delete(t.counts, token)
	t.mu.Unlock()
}
