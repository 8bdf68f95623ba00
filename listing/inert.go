package listing

import (
	"fmt"
	"strings"
	"unicode"
)

// inert is s for a terminal: each control character (C0, DEL, C1) an
// upstream put in a description, such as the start of an escape sequence
// that would clear the screen or write the clipboard, is written as a
// visible escape (\x1b, \u009b) and reaches the terminal as text.
func inert(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// inertLines is inert for each line of s, keeping its line breaks.
func inertLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = inert(l)
	}
	return strings.Join(lines, "\n")
}
