package upstream

import (
	"bytes"
	"unicode/utf8"
)

// validText returns data as text every JSON parser reads, as MCP requires
// of every message: valid UTF-8, with no \u escape of half a surrogate pair.
// It is data itself when it is so, else a copy in which each byte that
// starts no valid UTF-8 sequence, and each lone surrogate escape, is U+FFFD,
// which is what encoding/json (and so a client built on it) reads them as.
// Passed on as they came, one server's stray Latin-1 byte, or an emoji its
// server cut in half, would make a client that decodes strictly (serde_json,
// for one) refuse the whole message: a merged tools/list, with every other
// server's tools in it.
func validText(data []byte) []byte {
	if !utf8.Valid(data) {
		data = validUTF8(data)
	}
	if surrogateEscape(data) {
		data = pairedSurrogates(data)
	}
	return data
}

// surrogateEscape reports whether data may hold a \u escape of a surrogate
// (\ud... or \uD...), in one pass over it: every answer is looked at.
func surrogateEscape(data []byte) bool {
	for {
		i := bytes.Index(data, []byte(`\u`))
		if i < 0 || i+2 >= len(data) {
			return false
		}
		if data[i+2] == 'd' || data[i+2] == 'D' {
			return true
		}
		data = data[i+2:]
	}
}

// validUTF8 is data with each byte that starts no valid sequence as U+FFFD.
func validUTF8(data []byte) []byte {
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

// pairedSurrogates is data with each \u escape of a surrogate that is not
// one of a high and low pair written as \ufffd; data itself when there is
// none. Backslashes appear in JSON only in strings, each starting an escape.
func pairedSurrogates(data []byte) []byte {
	var out []byte // nil until the first change
	kept := 0      // data[:kept] is in out
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 >= len(data) || data[i+1] != 'u' {
			i++ // a two-character escape
			continue
		}
		r, ok := escapedRune(data[i:])
		switch {
		case !ok || r < 0xD800 || r > 0xDFFF:
		case r <= 0xDBFF:
			if low, ok := escapedRune(data[i+6:]); ok && low >= 0xDC00 && low <= 0xDFFF {
				i += 6 // the pair stays
				break
			}
			fallthrough
		default:
			out = append(append(out, data[kept:i]...), `\ufffd`...)
			kept = i + 6
		}
		i += 5
	}
	if out == nil {
		return data
	}
	return append(out, data[kept:]...)
}

// escapedRune reads the \uXXXX escape b starts with.
func escapedRune(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
