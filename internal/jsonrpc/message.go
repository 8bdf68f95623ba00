package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Message is any JSON-RPC 2.0 message: a request (ID and Method), a
// notification (Method, no ID) or a response (ID and Result or Error).
// Every payload is kept as the raw bytes it arrived as.
type Message struct {
	ID     json.RawMessage // nil for a notification
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *Error
}

// Error is a JSON-RPC error object, kept exactly: code, message and the raw
// data member.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Errorf builds an error object of the aggregator's own.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// IsRequest reports whether m expects a response.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m answers a request.
func (m *Message) IsResponse() bool { return m.Method == "" }

// DecodeError says why bytes are not a valid message, with the JSON-RPC
// code to answer with and, when it could be read, the id to answer to.
type DecodeError struct {
	Code   int
	ID     json.RawMessage // nil when unknown; answer with id null
	Reason string
}

// Error implements error.
func (e *DecodeError) Error() string { return e.Reason }

// Response is the error response a receiver sends back for e.
func (e *DecodeError) Response() *Message {
	id := e.ID
	if id == nil {
		id = json.RawMessage("null")
	}
	return &Message{ID: id, Error: &Error{Code: e.Code, Message: e.Reason}}
}

// Decode parses one message and checks it is valid JSON-RPC 2.0: "jsonrpc"
// is "2.0"; a request's id is a string or an integer; a response has exactly
// one of result and error. A response's id may also be null (the answer to a
// message whose id could not be read). Member names match exactly; a name
// that repeats counts with its last value, as encoding/json decodes it.
//
// It reads the message in one validating pass (rawjson.Object), keeping
// every member but the error object as the bytes it arrived as: every
// message of every call comes through here, and encoding/json would scan
// it twice and reflect over it. The message's members point into one copy
// of data, never into data itself, which the caller may reuse.
func Decode(data []byte) (*Message, error) { return DecodeOwned(bytes.Clone(data)) }

// AnswerID reads, from a message Decode refused, the id of the response
// it stands for: its top-level "id", read from the members before whatever
// could not be read, when no "method" was read. It is nil when the message
// does not look like a response, so that a receiver can fail the request
// it answers at once rather than let it wait for an answer that came.
func AnswerID(data []byte) json.RawMessage {
	var id []byte
	obj := rawjson.NewObject(data)
	for obj.Next() {
		switch string(obj.Name()) {
		case "id":
			id = obj.Value()
		case "method":
			return nil
		}
	}
	if !ValidID(id) {
		return nil
	}
	return id
}

// knownMethod returns the name of the method raw (a JSON string) without a
// copy when it is one of the methods every call sends or receives, written
// plainly; ok is false for any other.
func knownMethod(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	// A switch on a conversion compares without allocating, and each case
	// returns the constant.
	switch string(raw[1 : len(raw)-1]) {
	case "tools/call":
		return "tools/call", true
	case "tools/list":
		return "tools/list", true
	case "notifications/progress":
		return "notifications/progress", true
	case "notifications/cancelled":
		return "notifications/cancelled", true
	case "notifications/message":
		return "notifications/message", true
	case "resources/read":
		return "resources/read", true
	case "prompts/get":
		return "prompts/get", true
	case "ping":
		return "ping", true
	}
	return "", false
}

// DecodeOwned is Decode for data the caller hands over, such as a body read
// for this message alone: the message's members point into data itself,
// which the caller must neither change nor reuse, and no copy is made.
func DecodeOwned(data []byte) (*Message, error) {
	var m Message
	if err := DecodeBorrowed(&m, data); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeBorrowed is Decode into m, whose members borrow data: they point
// into it, valid only as long as data is left unchanged, and nothing is
// allocated for a valid message but the error object of an error response.
// A reader that reuses its buffer copies what it keeps of m before it reads
// on; m is left as it was when data is not a valid message.
func DecodeBorrowed(m *Message, data []byte) error {
	// The envelope's members, the last of each should a name repeat, as
	// encoding/json decodes them.
	var version, id, method, params, result, errRaw []byte
	obj := rawjson.NewObject(data)
	for obj.Next() {
		switch string(obj.Name()) {
		case "jsonrpc":
			version = obj.Value()
		case "id":
			id = obj.Value()
		case "method":
			method = obj.Value()
		case "params":
			params = obj.Value()
		case "result":
			result = obj.Value()
		case "error":
			errRaw = obj.Value()
		}
	}
	err := obj.Err()
	switch {
	case errors.Is(err, rawjson.ErrNotObject) && rawjson.Valid(data):
		return &DecodeError{Code: CodeInvalidRequest, Reason: "invalid request: the message must be a JSON object"}
	case errors.Is(err, rawjson.ErrTooDeep):
		return &DecodeError{Code: CodeParseError, Reason: fmt.Sprintf("parse error: the message is nested more than %d levels deep", rawjson.MaxDepth)}
	case err != nil:
		return &DecodeError{Code: CodeParseError, Reason: "parse error: the message is not valid JSON"}
	}
	if string(version) != `"2.0"` && !isString(version, "2.0") {
		return &DecodeError{Code: CodeInvalidRequest, ID: validIDOrNil(id), Reason: `invalid request: "jsonrpc" must be "2.0"`}
	}
	out := Message{Params: nonNull(params), Result: result}
	if method != nil && !isNull(method) {
		name, ok := knownMethod(method)
		if !ok {
			name, ok = rawjson.String(method)
		}
		switch {
		case !ok:
			return &DecodeError{Code: CodeInvalidRequest, ID: validIDOrNil(id), Reason: `invalid request: "method" must be a string`}
		case name == "":
			return &DecodeError{Code: CodeInvalidRequest, ID: validIDOrNil(id), Reason: `invalid request: "method" must not be empty`}
		}
		out.Method = name
		if id != nil {
			if !ValidID(id) {
				return &DecodeError{Code: CodeInvalidRequest, Reason: "invalid request: the id must be a string or an integer"}
			}
			out.ID = id
		}
		if len(out.Params) > 0 && out.Params[0] != '{' && out.Params[0] != '[' {
			return &DecodeError{Code: CodeInvalidRequest, ID: out.ID, Reason: `invalid request: "params" must be an object or an array`}
		}
		*m = out
		return nil
	}
	// A response.
	if id == nil || !(ValidID(id) || isNull(id)) {
		return &DecodeError{Code: CodeInvalidRequest, Reason: "invalid response: the id must be a string, an integer or null"}
	}
	out.ID = id
	switch {
	case errRaw != nil && !isNull(errRaw):
		var e Error
		if err := json.Unmarshal(errRaw, &e); err != nil {
			return &DecodeError{Code: CodeInvalidRequest, Reason: "invalid response: malformed error object"}
		}
		e.Data = trim(e.Data)
		out.Error = &e
		out.Result = nil
	case out.Result == nil:
		return &DecodeError{Code: CodeInvalidRequest, Reason: "invalid message: neither a request (method) nor a response (result or error)"}
	}
	*m = out
	return nil
}

// ValidID reports whether raw is a JSON string or a JSON integer.
func ValidID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		return rawjson.Valid(raw) // what is valid JSON and starts with a quote is a string
	}
	i := 0
	if raw[0] == '-' {
		i = 1
	}
	if i == len(raw) {
		return false
	}
	for ; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return false
		}
	}
	return true
}

func validIDOrNil(id json.RawMessage) json.RawMessage {
	if ValidID(id) {
		return id
	}
	return nil
}

func isNull(b []byte) bool { return string(b) == "null" }

// isString reports whether raw is a JSON string that decodes to s.
func isString(raw []byte, s string) bool {
	v, ok := rawjson.String(raw)
	return ok && v == s
}

func nonNull(b []byte) json.RawMessage {
	if len(b) == 0 || isNull(b) {
		return nil
	}
	return b
}

func trim(b json.RawMessage) json.RawMessage {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil
	}
	return b
}

// IDKey normalizes an id to a map key: numbers and strings that spell the
// same integer are the same id, as some peers echo one as the other.
func IDKey(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if _, err := strconv.ParseInt(s, 10, 64); err == nil {
				return s
			}
			return "s:" + s
		}
	}
	return string(raw)
}

// Append appends the encoding of m to b, without a newline. Raw members are
// copied as they are; nothing is re-encoded.
func (m *Message) Append(b []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0"`...)
	if m.ID != nil {
		b = append(b, `,"id":`...)
		b = append(b, m.ID...)
	}
	if m.Method != "" {
		b = append(b, `,"method":`...)
		b = rawjson.AppendString(b, m.Method)
		if len(m.Params) > 0 {
			b = append(b, `,"params":`...)
			b = append(b, m.Params...)
		}
		return append(b, '}')
	}
	if m.Error != nil {
		b = append(b, `,"error":`...)
		b = m.Error.Append(b)
		return append(b, '}')
	}
	b = append(b, `,"result":`...)
	if len(m.Result) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, m.Result...)
	}
	return append(b, '}')
}

// Encode returns the encoding of m.
func (m *Message) Encode() []byte {
	return m.Append(make([]byte, 0, m.encodedSizeHint()))
}

// encodedSizeHint is about the length of m's encoding: exact for raw
// members, with room for the framing and an error object's usual size.
func (m *Message) encodedSizeHint() int {
	n := 48 + len(m.ID) + len(m.Method) + len(m.Params) + len(m.Result)
	if m.Error != nil {
		n += 48 + len(m.Error.Message) + len(m.Error.Data)
	}
	return n
}

// Append appends the encoding of e to b.
func (e *Error) Append(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = rawjson.AppendString(b, e.Message)
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
	}
	return append(b, '}')
}

// Request builds a request whose params are encoded from v (raw bytes are
// used as they are).
func Request(id json.RawMessage, method string, params any) (*Message, error) {
	p, err := encodeParams(params)
	if err != nil {
		return nil, err
	}
	return &Message{ID: id, Method: method, Params: p}, nil
}

// Notification builds a notification whose params are encoded from v.
func Notification(method string, params any) (*Message, error) {
	p, err := encodeParams(params)
	if err != nil {
		return nil, err
	}
	return &Message{Method: method, Params: p}, nil
}

// Result builds a response whose result is encoded from v.
func Result(id json.RawMessage, v any) (*Message, error) {
	r, err := encodeParams(v)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = json.RawMessage("{}")
	}
	return &Message{ID: id, Result: r}, nil
}

// Failure builds an error response.
func Failure(id json.RawMessage, e *Error) *Message { return &Message{ID: id, Error: e} }

func encodeParams(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	case []byte:
		return p, nil
	default:
		return rawjson.Marshal(v)
	}
}

// IntID is the raw form of an integer id.
func IntID(n int64) json.RawMessage { return strconv.AppendInt(nil, n, 10) }
