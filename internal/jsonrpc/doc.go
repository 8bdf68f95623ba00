// Package jsonrpc is the one JSON-RPC 2.0 message type and the one
// newline framing of the project. Every side speaks through it: the
// upstream stdio connection, the downstream transports, the demo servers
// and the test clients. Payloads (params, result, error data) stay raw
// bytes from the wire to the wire; only the envelope is decoded.
package jsonrpc
