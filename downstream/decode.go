package downstream

import (
	"bytes"
	"errors"
	"unicode/utf8"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// bom is the UTF-8 byte order mark, which some tools write ahead of a
// JSON text; RFC 8259 lets a parser ignore it, and the transports do.
var bom = []byte("\xef\xbb\xbf")

// decodeClient decodes one message from the client: a JSON-RPC message in
// UTF-8, as MCP requires, with an optional byte order mark ahead of it.
// Invalid UTF-8 is refused rather than passed on, since upstream servers
// differ in what they make of it (replacement, a different string, or a
// failure of the whole connection that other sessions share). owned says
// data is the caller's to hand over (jsonrpc.DecodeOwned).
func decodeClient(data []byte, owned bool) (*jsonrpc.Message, *jsonrpc.DecodeError) {
	if !owned {
		data = bytes.Clone(data)
	}
	msg := new(jsonrpc.Message)
	if de := decodeClientInto(msg, data); de != nil {
		return nil, de
	}
	return msg, nil
}

// decodeClientInto is decodeClient into msg, whose members then point into
// data (jsonrpc.DecodeBorrowed): the stdio reader decodes a request into
// the call that serves it, which so costs no allocation of its own.
func decodeClientInto(msg *jsonrpc.Message, data []byte) *jsonrpc.DecodeError {
	data = bytes.TrimPrefix(data, bom)
	if err := jsonrpc.DecodeBorrowed(msg, data); err != nil {
		var de *jsonrpc.DecodeError
		if errors.As(err, &de) {
			return de
		}
		return &jsonrpc.DecodeError{Code: jsonrpc.CodeParseError, Reason: "parse error: " + err.Error()}
	}
	if !utf8.Valid(data) {
		de := &jsonrpc.DecodeError{Code: jsonrpc.CodeParseError,
			Reason: "parse error: the message is not valid UTF-8: encode every string as UTF-8 (binary data goes in base64)"}
		if msg.IsRequest() {
			de.ID = msg.ID
		}
		return de
	}
	return nil
}

// callKey is a request id's key among the requests in flight: the integer,
// for an id whose jsonrpc.IDKey is one written as strconv.FormatInt writes
// it (the usual kind of id, which so costs no string), else IDKey itself.
// Two ids have the same callKey exactly when they have the same IDKey.
type callKey struct {
	n int64
	s string // "" for an integer; never "" otherwise
}

func keyOf(id []byte) callKey {
	if len(id) > 0 && id[0] != '"' { // IDKey is the id as it is
		if n, ok := canonicalInt(id); ok {
			return callKey{n: n}
		}
	}
	k := jsonrpc.IDKey(id)
	if n, ok := canonicalInt(k); ok {
		return callKey{n: n}
	}
	return callKey{s: k}
}

// canonicalInt reads s when it is an integer of at most 18 digits written
// as strconv.FormatInt writes it: no sign but a minus, no leading zero, no
// "-0".
func canonicalInt[T string | []byte](s T) (int64, bool) {
	digits := s
	if len(s) > 0 && s[0] == '-' {
		digits = s[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || digits[0] == '0' && (len(digits) > 1 || len(s) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(s) {
		n = -n
	}
	return n, true
}
