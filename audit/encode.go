package audit

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendLine appends r to dst as one line of the audit log, its newline
// included: the bytes encoding/json writes for the Record (the same
// members in the same order, the same escaping, HTML characters and
// U+2028/U+2029 included, the same numbers), without its reflection or
// allocations. Args must be JSON as encoding/json writes it (compact), as
// the proxy makes it; a Time json cannot write (a year outside 0-9999) is
// written all the same, and a duration that is no number as 0.
func AppendLine(dst []byte, r *Record) []byte {
	dst = append(dst, `{"time":"`...)
	dst = r.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","event":`...)
	dst = appendString(dst, r.Event)
	dst = append(dst, `,"principal":{"kind":`...)
	dst = appendString(dst, r.Principal.Kind)
	dst = appendOptional(dst, `,"issuer":`, r.Principal.Issuer)
	dst = appendOptional(dst, `,"subject":`, r.Principal.Subject)
	dst = appendOptional(dst, `,"client":`, r.Principal.Client)
	dst = append(dst, '}')
	dst = appendOptional(dst, `,"session":`, r.Session)
	dst = appendOptional(dst, `,"view":`, r.View)
	dst = append(dst, `,"method":`...)
	dst = appendString(dst, r.Method)
	dst = appendOptional(dst, `,"server":`, r.Server)
	dst = appendOptional(dst, `,"tool":`, r.Tool)
	dst = appendOptional(dst, `,"original":`, r.Original)
	dst = appendOptional(dst, `,"args_sha256":`, r.ArgsSHA256)
	if len(r.Args) > 0 {
		dst = append(dst, `,"args":`...)
		dst = append(dst, r.Args...)
	}
	dst = append(dst, `,"outcome":`...)
	dst = appendString(dst, r.Outcome)
	dst = appendOptional(dst, `,"rule":`, r.Rule)
	dst = append(dst, `,"duration_ms":`...)
	dst = appendFloat(dst, r.DurationMS)
	dst = append(dst, `,"bytes_in":`...)
	dst = strconv.AppendInt(dst, int64(r.BytesIn), 10)
	dst = append(dst, `,"bytes_out":`...)
	dst = strconv.AppendInt(dst, int64(r.BytesOut), 10)
	dst = appendOptional(dst, `,"trace_id":`, r.TraceID)
	return append(dst, "}\n"...)
}

// appendOptional appends the member key (written with its comma and
// colon) and s, unless s is empty (omitempty).
func appendOptional(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendString(append(dst, key...), s)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it: the short escapes it knows, other control characters and
// <, >, & as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from 1e21.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
