package upstream

import "unicode/utf8"

// validText returns data as valid UTF-8, as MCP requires of every message:
// data itself when it is, else a copy in which each byte that starts no
// valid sequence is U+FFFD, which is what encoding/json (and so a client
// built on it) reads such a byte as. Passed on as it came, one server's stray
// Latin-1 byte would make a client that decodes strictly refuse the whole
// message: a merged tools/list, with every other server's tools in it.
func validText(data []byte) []byte {
	if utf8.Valid(data) {
		return data
	}
	out := make([]byte, 0, len(data)+len(data)/8)
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, data[:n]...)
		}
		data = data[n:]
	}
	return out
}
