package redact

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSetString(t *testing.T) {
	var s Set
	assert.Equal(t, "nothing known yet", s.String("nothing known yet"))
	s.Add("short", "token-1234567", "token-1234567-and-more", "")
	assert.Equal(t, "a <redacted> b <redacted> c short", s.String("a token-1234567 b token-1234567-and-more c short"),
		"short values are left alone; a secret containing another is replaced whole")
	var nilSet *Set
	assert.Equal(t, "x", nilSet.String("x"))
}

func TestHandlerScrubsMessageAndAttributes(t *testing.T) {
	var buf bytes.Buffer
	var s Set
	log := slog.New(s.Handler(slog.NewTextHandler(&buf, nil)))
	log.Info("before any secret is known: sk-live-abcdef")
	s.Add("sk-live-abcdef")
	log.With("bound", "sk-live-abcdef").Info("line sk-live-abcdef",
		"line", "stderr: TOKEN=sk-live-abcdef", "err", errors.New("dial sk-live-abcdef"), "n", 42,
		slog.Group("g", "inner", "sk-live-abcdef"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.Contains(t, lines[0], "sk-live-abcdef", "nothing to redact before Add")
	assert.NotContains(t, lines[1], "sk-live-abcdef")
	assert.Equal(t, 5, strings.Count(lines[1], Placeholder), lines[1])
	assert.Contains(t, lines[1], "n=42")
}

func TestSetConcurrentUse(t *testing.T) {
	var s Set
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); s.Add(strings.Repeat(string(rune('a'+i)), 10)) }()
		go func() { defer wg.Done(); _ = s.String("aaaaaaaaaa bbbbbbbbbb") }()
	}
	wg.Wait()
	assert.Equal(t, "<redacted> <redacted>", s.String("aaaaaaaaaa bbbbbbbbbb"))
}

// A refreshed token's predecessors leave the set once their time has passed,
// so that a process that refreshes for months does not grow the set; a value
// whose time has not passed, or that was added again, stays scrubbed.
func TestSetRetireBoundsTheSet(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Set{now: func() time.Time { return now }}
	s.Add("config-secret-value")
	live := "token-live-0000"
	s.Add(live)
	for i := 1; i <= 1000; i++ {
		next := fmt.Sprintf("token-live-%04d", i)
		s.Add(next)
		s.Retire(now.Add(time.Minute), live) // good for another minute
		assert.Equal(t, "<redacted>", s.String(live), "a replaced token is scrubbed while it still works")
		live = next
		now = now.Add(10 * time.Second)
	}
	assert.LessOrEqual(t, s.Len(), 1+1+7, "the config secret, the live token and those of the last minute: %d", s.Len())
	assert.Equal(t, "<redacted> <redacted>", s.String("config-secret-value "+live), "live values are never dropped")
	assert.Equal(t, "token-live-0001", s.String("token-live-0001"), "a long-dead token is no longer scrubbed")

	s.Retire(now.Add(-time.Second), live)
	s.Add(live) // still in use after all
	s.Add("another-value-x")
	assert.Equal(t, "<redacted>", s.String(live), "a value added again is live again")
	s.Retire(now, "never-added-value")
	assert.Equal(t, "never-added-value", s.String("never-added-value"), "retiring adds nothing")
}

// A value of several lines is printed, and quoted, a line at a time.
func TestSetAddsEachLineOfAValue(t *testing.T) {
	var s Set
	s.Add("-----BEGIN KEY-----\r\nline-one-abcdef\n  line-two-ghijkl  \nend\n")
	assert.Equal(t, "<redacted> | <redacted> | <redacted> | end", s.String("-----BEGIN KEY----- | line-one-abcdef | line-two-ghijkl | end"),
		"lines shorter than MinLen are left alone")
	assert.Equal(t, []string{"one line"}, Lines("one line"))
}
