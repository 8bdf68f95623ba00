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
	data = bytes.TrimPrefix(data, bom)
	var (
		msg *jsonrpc.Message
		err error
	)
	if owned {
		msg, err = jsonrpc.DecodeOwned(data)
	} else {
		msg, err = jsonrpc.Decode(data)
	}
	if err != nil {
		var de *jsonrpc.DecodeError
		if errors.As(err, &de) {
			return nil, de
		}
		return nil, &jsonrpc.DecodeError{Code: jsonrpc.CodeParseError, Reason: "parse error: " + err.Error()}
	}
	if !utf8.Valid(data) {
		de := &jsonrpc.DecodeError{Code: jsonrpc.CodeParseError,
			Reason: "parse error: the message is not valid UTF-8: encode every string as UTF-8 (binary data goes in base64)"}
		if msg.IsRequest() {
			de.ID = msg.ID
		}
		return nil, de
	}
	return msg, nil
}
