package rawjson

import "bytes"

// IsTrue reports whether obj, a JSON object, has name: true among its own
// members (the last one, should the name repeat, as encoding/json reads
// it). It runs on every tool call's result, so it does not validate: it
// skips strings by searching for their closing quote and nested values by
// counting brackets, which costs a large text item little more than a
// memchr; the result was checked when its message was read.
func IsTrue(obj []byte, name string) bool {
	depth, found := 0, false
	for i := 0; i < len(obj); i++ {
		switch obj[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(obj, i+1)
			if end < 0 {
				return false
			}
			if depth == 1 {
				if next := skipSpace(obj, end+1); next < len(obj) && obj[next] == ':' {
					if isKey(obj[i:end+1], name) {
						v := obj[skipSpace(obj, next+1):]
						found = len(v) >= 4 && string(v[:4]) == "true"
					}
					i = next
					continue
				}
			}
			i = end
		}
	}
	return found
}

// stringEnd returns the index of the quote closing the string whose
// content starts at from, or -1.
func stringEnd(b []byte, from int) int {
	for {
		j := bytes.IndexByte(b[from:], '"')
		if j < 0 {
			return -1
		}
		k := from + j
		backslashes := 0
		for p := k - 1; p >= from && b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return k
		}
		from = k + 1
	}
}

// isKey reports whether quoted, a JSON string with its quotes, is name,
// escaped or not.
func isKey(quoted []byte, name string) bool {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return len(quoted) == len(name)+2 && string(quoted[1:len(quoted)-1]) == name
	}
	s, ok := String(quoted)
	return ok && s == name
}
