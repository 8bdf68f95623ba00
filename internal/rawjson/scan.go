package rawjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
)

// maxDepth is the deepest nesting Valid and Object accept, encoding/json's
// own bound, so that both accept exactly what encoding/json accepts.
const maxDepth = 10000

// recurseDepth is how deep skipValue recurses; deeper containers are
// scanned without recursion (skipNested). Messages seldom nest this deep,
// and recursion is the faster way for those that do not.
const recurseDepth = 64

// errSyntax is what the scanner reports for bytes that are not JSON.
var errSyntax = errors.New("rawjson: invalid JSON")

// ErrNotObject reports valid JSON that is not an object.
var ErrNotObject = errors.New("rawjson: not a JSON object")

// ErrTooDeep reports JSON that nests objects and arrays more than MaxDepth
// levels deep, which encoding/json (and so this package) does not take.
var ErrTooDeep = errors.New("rawjson: nested too deep")

// MaxDepth is the deepest nesting of objects and arrays accepted.
const MaxDepth = maxDepth

// Valid reports whether data is one JSON value, with optional whitespace
// around it. It accepts exactly what json.Valid accepts, in one pass and
// without encoding/json's per-byte state machine.
func Valid(data []byte) bool {
	i, ok := skipValue(data, skipSpace(data, 0), 0)
	return ok && skipSpace(data, i) == len(data)
}

// Object reads the members of a JSON object in one pass, keeping every
// value as the bytes it arrived as: the way to read the few members a
// message is routed by without decoding the rest. It validates as it goes
// (as json.Valid would), so once Next has returned false and Err is nil,
// the whole input was one valid JSON object.
//
//	obj := rawjson.NewObject(data)
//	for obj.Next() {
//		switch string(obj.Name()) { ... obj.Value() ... }
//	}
//	if err := obj.Err(); err != nil { ... }
type Object struct {
	data        []byte
	pos         int
	name, value []byte
	nameStart   int
	valueStart  int
	err         error
	started     bool
	done        bool
}

// NewObject returns an Object reading data.
func NewObject(data []byte) Object { return Object{data: data} }

// Next advances to the next member and reports whether there is one.
func (o *Object) Next() bool {
	if o.done {
		return false
	}
	d := o.data
	i := skipSpace(d, o.pos)
	if !o.started {
		o.started = true
		if i == len(d) || d[i] != '{' {
			return o.fail(ErrNotObject)
		}
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == '}' {
			return o.end(i + 1)
		}
	} else {
		switch {
		case i < len(d) && d[i] == ',':
			i = skipSpace(d, i+1)
		case i < len(d) && d[i] == '}':
			return o.end(i + 1)
		default:
			return o.fail(errSyntax)
		}
	}
	if i == len(d) || d[i] != '"' {
		return o.fail(errSyntax)
	}
	o.nameStart = i
	end, ok := skipString(d, i)
	if !ok {
		return o.fail(errSyntax)
	}
	if o.name = d[i+1 : end-1]; !plain(o.name) {
		s, _ := String(d[i:end])
		o.name = []byte(s)
	}
	i = skipSpace(d, end)
	if i == len(d) || d[i] != ':' {
		return o.fail(errSyntax)
	}
	i = skipSpace(d, i+1)
	end, ok = skipValue(d, i, 1)
	if !ok {
		if nestsDeeper(d[i:], maxDepth-1) {
			return o.fail(ErrTooDeep)
		}
		return o.fail(errSyntax)
	}
	o.value = d[i:end]
	o.valueStart = i
	o.pos = end
	return true
}

// Name is the current member's name, unescaped. It may alias the input.
func (o *Object) Name() []byte { return o.name }

// Value is the current member's value: its exact bytes, without the
// whitespace around it.
func (o *Object) Value() []byte { return o.value }

// ValueSpan is where the current member's value lies in the input:
// Value is data[start:end].
func (o *Object) ValueSpan() (start, end int) { return o.valueStart, o.pos }

// MemberSpan is where the current member lies in the input, from the
// opening quote of its name to the end of its value.
func (o *Object) MemberSpan() (start, end int) { return o.nameStart, o.pos }

// Err is nil once Next has gone through one valid JSON object to its end
// (whitespace may follow it); ErrNotObject when the input does not start
// with one; ErrTooDeep when a member's value nests deeper than MaxDepth;
// otherwise a syntax error. A caller that stops early gets nil.
func (o *Object) Err() error { return o.err }

// nestsDeeper reports whether the objects and arrays d starts with open
// more than limit levels deep, reading strings as strings and nothing else
// as JSON: it tells why a value failed to scan, not whether it is valid.
func nestsDeeper(d []byte, limit int) bool {
	depth := 0
	for i := 0; i < len(d); i++ {
		switch d[i] {
		case '{', '[':
			if depth++; depth > limit {
				return true
			}
		case '}', ']':
			if depth--; depth <= 0 {
				return false
			}
		case '"':
			for i++; i < len(d) && d[i] != '"'; i++ {
				if d[i] == '\\' {
					i++
				}
			}
		}
	}
	return false
}

func (o *Object) end(i int) bool {
	o.done = true
	if skipSpace(o.data, i) != len(o.data) {
		o.err = errSyntax
	}
	return false
}

func (o *Object) fail(err error) bool {
	o.done, o.err = true, err
	return false
}

// Member returns the value of obj's member name (the last one, should a
// name repeat, as encoding/json decodes it), or nil when obj has none or is
// not a valid JSON object.
func Member(obj []byte, name string) []byte {
	var v []byte
	o := NewObject(obj)
	for o.Next() {
		if string(o.Name()) == name {
			v = o.Value()
		}
	}
	if o.Err() != nil {
		return nil
	}
	return v
}

// Members reads, in one pass over obj, the value of each member names
// names into values at the same index: the last one, should a name repeat,
// as encoding/json decodes it, and nil for a name obj has not. It returns
// the error Object.Err gives for an obj that is not a valid JSON object,
// with the members read before it in values.
func Members(obj []byte, names []string, values [][]byte) error {
	o := NewObject(obj)
	for o.Next() {
		for i, name := range names {
			if string(o.Name()) == name {
				values[i] = o.Value()
				break
			}
		}
	}
	return o.Err()
}

// Mentions reports whether data may hold a member called name: false only
// when name is nowhere in it, neither as it is nor written with \u escapes.
// It is a fast guard (a byte search) before a scan for a member that few
// messages have.
func Mentions(data []byte, name string) bool {
	return contains(data, name) || bytes.Contains(data, []byte(`\u`))
}

// contains is bytes.Contains(data, []byte(name)) without the copy of a name
// over 32 bytes (such as io.modelcontextprotocol/serverInfo), which a
// conversion puts on the heap: its first 32 bytes are searched for, and
// the rest compared where they are found.
func contains(data []byte, name string) bool {
	const stackBytes = 32 // what a conversion that does not escape keeps on the stack
	if len(name) <= stackBytes {
		return bytes.Contains(data, []byte(name))
	}
	head := []byte(name[:stackBytes])
	for {
		i := bytes.Index(data, head)
		if i < 0 {
			return false
		}
		if string(data[i:min(len(data), i+len(name))]) == name {
			return true
		}
		data = data[i+1:]
	}
}

// String returns the JSON string raw as a Go string, as json.Unmarshal
// decodes it; ok is false when raw is not a string.
func String(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if inner := raw[1 : len(raw)-1]; plain(inner) {
		return string(inner), true
	}
	return unquote(raw)
}

// unquote decodes a JSON string with encoding/json; apart from String, so
// that String's fast path does not allocate the variable decoded into.
func unquote(raw []byte) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// plain reports whether the inside of a JSON string means itself: printable
// ASCII without escapes. Anything else is decoded by encoding/json, which
// also replaces invalid UTF-8 as it does everywhere else.
func plain(inner []byte) bool {
	for _, c := range inner {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value that starts at d[i], nested
// depth containers deep, and whether it is valid.
func skipValue(d []byte, i, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '"':
		end, ok := skipString(d, i)
		return end, ok
	case c == '{':
		if depth >= recurseDepth {
			return skipNested(d, i, depth)
		}
		return skipObject(d, i, depth+1)
	case c == '[':
		if depth >= recurseDepth {
			return skipNested(d, i, depth)
		}
		return skipArray(d, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(d, i)
	case c == 't':
		return skipLiteral(d, i, "true")
	case c == 'f':
		return skipLiteral(d, i, "false")
	case c == 'n':
		return skipLiteral(d, i, "null")
	}
	return i, false
}

// skipNested is skipValue for a value nested recurseDepth or more deep. It
// keeps the containers it is inside of on a stack of its own rather than
// recursing, so that a value nested ten thousand deep costs a few
// kilobytes, not megabytes of goroutine stack that would stay with the
// goroutine serving it.
func skipNested(d []byte, i, depth int) (int, bool) {
	var small [32]bool
	open := small[:0] // the containers open within the value: true for an object
	for {
		// i is at the start of a value.
		if i >= len(d) {
			return i, false
		}
		var ok bool
		switch c := d[i]; {
		case c == '{' || c == '[':
			if depth+len(open)+1 > maxDepth {
				return i, false
			}
			closing := byte(']')
			if c == '{' {
				closing = '}'
			}
			i = skipSpace(d, i+1)
			if i < len(d) && d[i] == closing {
				i++
				break
			}
			open = append(open, c == '{')
			if c == '{' {
				if i, ok = skipKey(d, i); !ok {
					return i, false
				}
			}
			continue
		case c == '"':
			if i, ok = skipString(d, i); !ok {
				return i, false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if i, ok = skipNumber(d, i); !ok {
				return i, false
			}
		case c == 't':
			if i, ok = skipLiteral(d, i, "true"); !ok {
				return i, false
			}
		case c == 'f':
			if i, ok = skipLiteral(d, i, "false"); !ok {
				return i, false
			}
		case c == 'n':
			if i, ok = skipLiteral(d, i, "null"); !ok {
				return i, false
			}
		default:
			return i, false
		}
		// A value ended at i: close the containers it ends, then go on to
		// the next value of the innermost one still open.
		for {
			if len(open) == 0 {
				return i, true
			}
			i = skipSpace(d, i)
			if i == len(d) {
				return i, false
			}
			object := open[len(open)-1]
			closing := byte(']')
			if object {
				closing = '}'
			}
			if d[i] == closing {
				i++
				open = open[:len(open)-1]
				continue
			}
			if d[i] != ',' {
				return i, false
			}
			i = skipSpace(d, i+1)
			if object {
				if i, ok = skipKey(d, i); !ok {
					return i, false
				}
			}
			break
		}
	}
}

// skipKey skips an object member's name and its colon from d[i], and the
// whitespace after it: it returns where the member's value starts.
func skipKey(d []byte, i int) (int, bool) {
	if i == len(d) || d[i] != '"' {
		return i, false
	}
	end, ok := skipString(d, i)
	if !ok {
		return end, false
	}
	i = skipSpace(d, end)
	if i == len(d) || d[i] != ':' {
		return i, false
	}
	return skipSpace(d, i+1), true
}

func skipLiteral(d []byte, i int, lit string) (int, bool) {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// skipString returns the end of the string that starts at d[i] (just after
// its closing quote) and whether it is valid. It goes eight bytes at a time
// over runs without a quote, a backslash or a control character: the text
// of a tool's result is most of the bytes of a call.
func skipString(d []byte, i int) (int, bool) {
	for i++; ; i++ {
		for len(d)-i >= 8 {
			if m := stringSpecials(binary.LittleEndian.Uint64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8 // the first of them
				break
			}
			i += 8
		}
		if i >= len(d) {
			return i, false
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i == len(d) {
				return i, false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(d)-i <= 4 {
					return i, false
				}
				for _, h := range d[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
}

// stringSpecials marks the bytes of x (eight, little-endian) that a string
// scan must look at: a quote, a backslash or a control character (below
// 0x20). Each test is the classic one for a zero byte (or one below n),
// (v - 0x01...) &^ v & 0x80...: it sets the high bit of the first such
// byte, and of no byte when there is none (above the first it may mark
// others that are not).
func stringSpecials(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (x-ones*0x20)&^x) & highs
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func skipNumber(d []byte, i int) (int, bool) {
	if d[i] == '-' {
		i++
	}
	switch {
	case i == len(d):
		return i, false
	case d[i] == '0':
		i++
	case d[i] >= '1' && d[i] <= '9':
		i = skipDigits(d, i)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		j := skipDigits(d, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := skipDigits(d, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// skipObject returns the end of the object that opens at d[i], nested
// depth containers deep, and whether it is valid.
func skipObject(d []byte, i, depth int) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = skipKey(d, i); !ok {
			return i, false
		}
		if i, ok = skipValue(d, i, depth); !ok {
			return i, false
		}
		i = skipSpace(d, i)
		switch {
		case i == len(d):
			return i, false
		case d[i] == '}':
			return i + 1, true
		case d[i] != ',':
			return i, false
		}
		i = skipSpace(d, i+1)
	}
}

// skipArray is skipObject for an array.
func skipArray(d []byte, i, depth int) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = skipValue(d, i, depth); !ok {
			return i, false
		}
		i = skipSpace(d, i)
		switch {
		case i == len(d):
			return i, false
		case d[i] == ']':
			return i + 1, true
		case d[i] != ',':
			return i, false
		}
		i = skipSpace(d, i+1)
	}
}
