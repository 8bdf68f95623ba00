package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHiddenNamesThrottle: one line a minute for each client and name, the
// requests in between counted in the next line; and no more than
// maxHiddenNameKeys names a minute in all, however many a client makes up.
func TestHiddenNamesThrottle(t *testing.T) {
	var h hiddenNames
	t0 := time.Unix(1_700_000_000, 0)
	type step struct {
		key              string
		at               time.Duration
		ok               bool
		skipped, dropped int
	}
	for i, s := range []step{
		{key: "ci\x00tool\x00a", at: 0, ok: true},
		{key: "ci\x00tool\x00a", at: time.Second},
		{key: "ci\x00tool\x00a", at: 59 * time.Second},
		{key: "ci\x00tool\x00b", at: 59 * time.Second, ok: true},
		{key: "other\x00tool\x00a", at: 59 * time.Second, ok: true},
		{key: "ci\x00tool\x00a", at: time.Minute, ok: true, skipped: 2},
		{key: "ci\x00tool\x00a", at: 2 * time.Minute, ok: true},
	} {
		ok, skipped, dropped := h.allow(s.key, t0.Add(s.at))
		assert.Equal(t, []any{s.ok, s.skipped, s.dropped}, []any{ok, skipped, dropped}, "step %d: %q at %s", i, s.key, s.at)
	}

	var full hiddenNames
	for i := range maxHiddenNameKeys {
		ok, _, _ := full.allow(fmt.Sprintf("ci\x00resource\x00u%d", i), t0)
		require.True(t, ok, "name %d", i)
	}
	ok, _, _ := full.allow("ci\x00resource\x00one-more", t0.Add(time.Second))
	assert.False(t, ok, "a name past the bound is not logged")
	ok, _, _ = full.allow("ci\x00resource\x00another", t0.Add(2*time.Second))
	assert.False(t, ok)
	ok, skipped, dropped := full.allow("ci\x00resource\x00later", t0.Add(time.Minute))
	assert.Equal(t, []any{true, 0, 2}, []any{ok, skipped, dropped}, "a minute on, the old names make room, and the line counts those left out")
	assert.LessOrEqual(t, len(full.last), maxHiddenNameKeys)
}

// TestTruncatedName: a long name is cut at a rune boundary within the bound.
func TestTruncatedName(t *testing.T) {
	assert.Equal(t, "short", truncatedName("short"))
	long := strings.Repeat("é", maxLoggedNameLen) // two bytes each
	got := truncatedName(long)
	assert.True(t, utf8.ValidString(got))
	assert.LessOrEqual(t, len(strings.TrimSuffix(got, "…")), maxLoggedNameLen)
	assert.True(t, strings.HasSuffix(got, "…"))
}
