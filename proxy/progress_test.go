package proxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func progressLine(token string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + token + `,"progress":1}}`)
}

func TestProgressTrackerWaitsForWrittenProgress(t *testing.T) {
	tr := newProgressTracker()
	const token = `"abc"`
	tr.begin(token)
	tr.sent(token)
	tr.sent(token)

	finished := make(chan struct{})
	go func() {
		tr.finish(token)
		close(finished)
	}()
	tr.observe(progressLine(`"other"`)) // someone else's progress
	tr.observe([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	tr.observe(progressLine(token))
	select {
	case <-finished:
		t.Fatal("finish returned with one notification still unwritten")
	default:
	}
	began := time.Now()
	tr.observe(progressLine(token))
	select {
	case <-finished:
	case <-time.After(progressFlushWait / 2):
		t.Fatal("finish did not return once the written count caught up")
	}
	assert.Less(t, time.Since(began), progressFlushWait/2)

	tr.mu.Lock()
	_, kept := tr.counts[token]
	tr.mu.Unlock()
	assert.False(t, kept, "finish forgets the token")
}

func TestProgressTrackerNumberTokens(t *testing.T) {
	tr := newProgressTracker()
	tr.begin(`7`)
	tr.sent(`7`)
	tr.observe(progressLine(`7`))
	began := time.Now()
	tr.finish(`7`)
	assert.Less(t, time.Since(began), progressFlushWait/2)
}

func TestProgressTrackerFinishIsBounded(t *testing.T) {
	tr := newProgressTracker()
	tr.begin(`"lost"`)
	tr.sent(`"lost"`) // never written
	began := time.Now()
	tr.finish(`"lost"`)
	took := time.Since(began)
	assert.GreaterOrEqual(t, took, progressFlushWait)
	assert.Less(t, took, progressFlushWait+2*time.Second)
}

func TestProgressTrackerNothingSent(t *testing.T) {
	tr := newProgressTracker()
	began := time.Now()
	tr.finish(`"never-begun"`)
	tr.begin(`"quiet"`)
	tr.finish(`"quiet"`)
	tr.sent(`"unknown"`)                  // ignored
	tr.observe(progressLine(`"unknown"`)) // ignored
	assert.Less(t, time.Since(began), progressFlushWait/2)
}
