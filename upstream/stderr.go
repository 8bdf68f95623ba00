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
// there, and the error then tells the operator without the log.
type stderrTail struct {
	mu    sync.Mutex
	lines [tailLines]string
	next  int // where the next line goes
	n     int // lines kept
}

// How many stderr lines an exit error quotes, and how much of each.
const (
	tailLines = 3
	tailBytes = 200
)

func (t *stderrTail) add(line []byte) {
	if len(line) > tailBytes {
		cut := tailBytes
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = append(line[:cut:cut], "…"...)
	}
	t.mu.Lock()
	t.lines[t.next] = string(line)
	t.next = (t.next + 1) % tailLines
	t.n = min(t.n+1, tailLines)
	t.mu.Unlock()
}

// said renders the kept lines, oldest first, to follow an exit status; ""
// when the server wrote nothing to stderr.
func (t *stderrTail) said() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return ""
	}
	quoted := make([]string, 0, t.n)
	for i := range t.n {
		quoted = append(quoted, strconv.Quote(t.lines[(t.next-t.n+i+tailLines)%tailLines]))
	}
	return "; its last words on stderr: " + strings.Join(quoted, " | ")
}
