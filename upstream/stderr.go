package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxStderrLine is how much of one stderr line of an upstream is kept for the
// log; the rest of the line is counted, not kept. An upstream that writes one
// endless line costs this much memory, not the length of the line.
const maxStderrLine = 64 << 10

// secretMargin is how far beyond maxStderrLine a stderr line is read before
// its secrets are scrubbed and it is cut: room for the longest secret (a PEM
// key in a variable) to be seen whole where the cut falls.
const secretMargin = 8 << 10

// cutAtRune returns the longest prefix of text of at most n bytes that does
// not end inside a UTF-8 sequence.
func cutAtRune(text string, n int) string {
	if len(text) <= n {
		return text
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}

// stderrLines reads r line by line until it ends and hands fn each non-empty
// line, without its terminator, cut to at most limit bytes, with the number
// of bytes cut off. line is valid only during the call.
func stderrLines(r io.Reader, limit int, fn func(line []byte, cut int64)) {
	br := bufio.NewReaderSize(r, 16<<10)
	buf := make([]byte, 0, 4<<10)
	for {
		buf = buf[:0]
		var cut int64
		for {
			chunk, err := br.ReadSlice('\n')
			keep := min(len(chunk), limit-len(buf))
			buf = append(buf, chunk[:keep]...)
			cut += int64(len(chunk) - keep)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err == nil { // the line ends with chunk: drop its terminator
				term := int64(1)
				if len(chunk) >= 2 && chunk[len(chunk)-2] == '\r' {
					term = 2
				}
				if cut >= term {
					cut -= term
				} else {
					buf = buf[:len(buf)-int(term-cut)]
					cut = 0
				}
			}
			if line := bytes.TrimRight(buf, "\r\n"); len(line) > 0 || cut > 0 {
				fn(line, cut)
			}
			if err != nil {
				return
			}
			break
		}
	}
}

// How many stderr lines of one upstream the log takes: a burst of
// stderrBurst, then stderrRate a second. What is beyond is read and left
// out, and the count said, so that a server that floods its stderr cannot
// flood the aggregator's log.
const (
	stderrBurst = 2000
	stderrRate  = 200
)

// lineBudget is a token bucket of log lines, for one reader: a burst, then
// a rate a second. The zero value is the budget of stderr lines.
type lineBudget struct {
	burst, rate float64 // 0: stderrBurst, stderrRate
	tokens      float64
	last        time.Time // of the last refill; zero: never used
	dropped     int       // lines left out since the last report
	reported    time.Time
}

// take reports whether one more line may be logged at now.
func (b *lineBudget) take(now time.Time) bool {
	if b.burst == 0 {
		b.burst, b.rate = stderrBurst, stderrRate
	}
	if b.last.IsZero() {
		b.tokens, b.last, b.reported = b.burst, now, now
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	b.dropped++
	return false
}

// report logs msg with how many lines were left out, at most once a second
// unless final.
func (b *lineBudget) report(now time.Time, final bool, log *slog.Logger, server, msg string) {
	if b.dropped == 0 || (!final && now.Sub(b.reported) < time.Second) {
		return
	}
	log.Warn(msg, "server", server, "left_out", b.dropped,
		"limit", fmt.Sprintf("%.0f lines, then %.0f a second", b.burst, b.rate))
	b.dropped, b.reported = 0, now
}

// stderrTail keeps the last lines an upstream wrote to stderr, each cut
// short, to say why it exited: a server that fails at start mostly says why
// there, and the error then tells the operator without the log. A line is
// kept a margin beyond what is said of it, and scrubbed before it is cut.
type stderrTail struct {
	mu    sync.Mutex
	lines [tailLines]string
	long  [tailLines]bool // the line was longer than what is kept of it
	next  int             // where the next line goes
	n     int             // lines kept
}

// How many stderr lines an exit error quotes, and how much of each.
const (
	tailLines = 3
	tailBytes = 200
)

func (t *stderrTail) add(line []byte) {
	long := len(line) > tailBytes+secretMargin
	kept := string(line[:min(len(line), tailBytes+secretMargin)])
	t.mu.Lock()
	t.lines[t.next], t.long[t.next] = kept, long
	t.next = (t.next + 1) % tailLines
	t.n = min(t.n+1, tailLines)
	t.mu.Unlock()
}

// said renders the kept lines, oldest first, each scrubbed (scrub may be
// nil) and cut short, to follow an exit status; "" when the server wrote
// nothing to stderr.
func (t *stderrTail) said(scrub func(string) string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return ""
	}
	quoted := make([]string, 0, t.n)
	for i := range t.n {
		at := (t.next - t.n + i + tailLines) % tailLines
		line := t.lines[at]
		if scrub != nil {
			line = scrub(line)
		}
		if t.long[at] || len(line) > tailBytes {
			line = cutAtRune(line, tailBytes) + "…"
		}
		quoted = append(quoted, strconv.Quote(line))
	}
	return "; its last words on stderr: " + strings.Join(quoted, " | ")
}
