package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
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
