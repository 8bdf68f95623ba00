package downstream

import (
	"strconv"
	"unicode/utf8"
)

// maxLogged bounds what a log line shows of a value a client chose (an id,
// a method, a header quoted in a refusal): a client must not be able to
// write megabytes to the log with each message it sends.
const maxLogged = 256

// clip returns s, or its first maxLogged bytes (never splitting a UTF-8
// sequence) followed by how long it was.
func clip(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	cut := maxLogged
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
