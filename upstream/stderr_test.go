package upstream

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type cutLine struct {
	line string
	cut  int64
}

func TestStderrLines(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name  string
		input string
		want  []cutLine
	}{
		{"short lines", "a\nbb\n", []cutLine{{"a", 0}, {"bb", 0}}},
		{"CRLF", "a\r\nb\r\n", []cutLine{{"a", 0}, {"b", 0}}},
		{"empty lines are skipped", "\n\na\n", []cutLine{{"a", 0}}},
		{"last line without newline", "a\nlast", []cutLine{{"a", 0}, {"last", 0}}},
		{"exactly the limit", strings.Repeat("y", 64) + "\n", []cutLine{{strings.Repeat("y", 64), 0}}},
		{"exactly the limit, CRLF", strings.Repeat("y", 64) + "\r\n", []cutLine{{strings.Repeat("y", 64), 0}}},
		{"a long line is cut and counted", long + "\nnext\n", []cutLine{{long[:64], 36}, {"next", 0}}},
		{"a long line with CRLF", long + "\r\nnext\n", []cutLine{{long[:64], 36}, {"next", 0}}},
		{"a long last line", long, []cutLine{{long[:64], 36}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []cutLine
			stderrLines(strings.NewReader(tc.input), 64, func(line []byte, cut int64) {
				got = append(got, cutLine{string(line), cut})
			})
			assert.Equal(t, tc.want, got)
		})
	}
}

// endless is a reader of n bytes of 'e' and then a newline, made up as it is
// read, so that no test buffer holds the line.
type endless struct{ n int64 }

var es = []byte(strings.Repeat("e", 64<<10))

func (e *endless) Read(p []byte) (int, error) {
	switch {
	case e.n < 0:
		return 0, io.EOF
	case e.n == 0:
		e.n = -1
		return copy(p, "\n"), nil
	}
	n := copy(p[:min(int64(len(p)), e.n)], es)
	e.n -= int64(n)
	return n, nil
}

func TestStderrLinesKeepsOnlyTheLimit(t *testing.T) {
	const total = 256 << 20 // the size of line that used to be held whole
	var got []cutLine
	stderrLines(&endless{n: total}, maxStderrLine, func(line []byte, cut int64) {
		got = append(got, cutLine{string(line[:8]), cut})
		assert.Len(t, line, maxStderrLine)
		assert.LessOrEqual(t, cap(line), 2*maxStderrLine, "the buffer stays near the limit")
	})
	assert.Equal(t, []cutLine{{"eeeeeeee", total - maxStderrLine}}, got)
}

func TestLongStderrLineIsCutInTheLog(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	startDemo(t, "misbehave long-stderr-line", Options{Logger: rec.Logger()})
	const written = 8 << 20 // the demo's line
	line := rec.WaitFor(t, "more bytes)")
	assert.Contains(t, line, "line="+pattern(1024), "the line starts as written")
	assert.Contains(t, line, fmt.Sprintf("… (%d more bytes)", written-maxStderrLine))
	assert.Less(t, len(line), maxStderrLine+200, "only the limit is kept")
	require.Contains(t, rec.WaitFor(t, "long line written"), "line=long line written", "the next line arrives whole")
}

// TestStderrFloodIsBounded: a server that writes more to stderr than the log
// takes has the rest read and left out, and the number left out said.
func TestStderrFloodIsBounded(t *testing.T) {
	const lines = 10 * stderrBurst
	var in strings.Builder
	for i := range lines {
		fmt.Fprintf(&in, "noise %d\n", i)
	}
	rec := newLogRecorder()
	c := &stdioConn{server: "loud", log: rec.Logger(), stderrDone: make(chan struct{})}
	c.logStderr(strings.NewReader(in.String()))
	logged, leftOut := 0, 0
	for _, l := range rec.Lines() {
		switch {
		case strings.HasPrefix(l, "INFO upstream stderr server=loud line=noise "):
			logged++
		case strings.HasPrefix(l, "WARN upstream writes to stderr faster than the log takes; lines left out server=loud left_out="):
			var n int
			_, err := fmt.Sscanf(l[strings.Index(l, "left_out=")+len("left_out="):], "%d", &n)
			require.NoError(t, err, l)
			leftOut += n
		}
	}
	assert.GreaterOrEqual(t, logged, stderrBurst, "the burst is logged")
	assert.Less(t, logged, lines/2, "the flood is not")
	assert.Equal(t, lines, logged+leftOut, "every line is logged or counted")
	assert.Contains(t, rec.Lines()[0], "line=noise 0", "lines are logged from the first")
}

// The last stderr lines kept for an exit error: the newest few, oldest
// first, each scrubbed, then cut short without splitting a character.
func TestStderrTail(t *testing.T) {
	var tail stderrTail
	assert.Empty(t, tail.said(nil))
	tail.add([]byte("one"))
	assert.Equal(t, `; its last words on stderr: "one"`, tail.said(nil))
	for _, l := range []string{"two", "three", "four"} {
		tail.add([]byte(l))
	}
	assert.Equal(t, `; its last words on stderr: "two" | "three" | "four"`, tail.said(nil))
	tail.add([]byte(strings.Repeat("é", tailBytes)))
	said := tail.said(nil)
	last, err := strconv.Unquote(said[strings.LastIndex(said, " | ")+3:])
	require.NoError(t, err)
	assert.True(t, utf8.ValidString(last))
	assert.LessOrEqual(t, len(last), tailBytes+len("…"))

	secret := "tailsecret-0123456789"
	tail.add([]byte(strings.Repeat("x", tailBytes-5) + secret + strings.Repeat("y", 2*secretMargin)))
	scrub := func(s string) string { return strings.ReplaceAll(s, secret, "<redacted>") }
	said = tail.said(scrub)
	assert.NotContains(t, said, secret[:5], "a secret the cut would split is scrubbed first")
	assert.True(t, strings.HasSuffix(said, `x<reda…"`), said)
}
