package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

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
