package upstream

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// envelope is any JSON-RPC 2.0 message with every payload kept raw, so one
// decode tells requests, notifications and responses apart without losing a byte.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// outgoing is a request or notification we send; Params is marshalled as given.
type outgoing struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// reply answers a request the upstream sent us.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error returned by an upstream, kept exactly:
// code, message and the raw data member.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("upstream error %d: %s", e.Code, e.Message)
}

// Notification is a message the upstream sent without an id.
type Notification struct {
	Method string
	Params json.RawMessage
}

// idKey normalizes a raw JSON-RPC id to a map key; numbers and strings that
// spell the same integer are the same id.
func idKey(raw json.RawMessage) string {
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
