package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// JSON-RPC 2.0 error codes used by the hand-written servers.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// message is one incoming JSON-RPC message. Every part that is passed back
// (the id above all) stays raw so that it is echoed byte for byte.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// isRequest reports whether m expects a response.
func (m *message) isRequest() bool { return len(m.ID) > 0 && m.Method != "" }

// lineConn writes newline-delimited JSON-RPC messages, one whole line per
// Write call, from any number of goroutines.
type lineConn struct {
	mu  sync.Mutex
	out io.Writer
	// beforeResponse, when set, runs under the write lock before each
	// response, so misbehaving servers can inject extra lines.
	beforeResponse func(w io.Writer) error
}

func (c *lineConn) write(line []byte, response bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if response && c.beforeResponse != nil {
		if err := c.beforeResponse(c.out); err != nil {
			return err
		}
	}
	_, err := c.out.Write(line)
	return err
}

// respond sends a result, which must be compact JSON, for request id.
func (c *lineConn) respond(id, result json.RawMessage) error {
	line := make([]byte, 0, len(id)+len(result)+40)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"result":`...)
	line = append(line, result...)
	line = append(line, "}\n"...)
	return c.write(line, true)
}

// respondValue marshals result and sends it for request id.
func (c *lineConn) respondValue(id json.RawMessage, result any) error {
	raw, err := marshal(result)
	if err != nil {
		return err
	}
	return c.respond(id, raw)
}

// fail sends an error response; errObj must be a compact JSON-RPC error
// object.
func (c *lineConn) fail(id, errObj json.RawMessage) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	line := make([]byte, 0, len(id)+len(errObj)+40)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"error":`...)
	line = append(line, errObj...)
	line = append(line, "}\n"...)
	return c.write(line, true)
}

// failCode sends an error response with the given code and message.
func (c *lineConn) failCode(id json.RawMessage, code int, msg string) error {
	raw, err := marshal(map[string]any{"code": code, "message": msg})
	if err != nil {
		return err
	}
	return c.fail(id, raw)
}

// notify sends a notification.
func (c *lineConn) notify(method string, params any) error {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	raw, err := marshal(m)
	if err != nil {
		return err
	}
	return c.write(append(raw, '\n'), false)
}

// marshal encodes v as compact JSON without escaping <, > and &.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// compact returns raw without insignificant whitespace, leaving every token
// (numbers and strings included) exactly as written.
func compact(raw []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// serveLines reads newline-delimited messages from in and passes each
// non-blank line to handle, one at a time, until in reaches EOF, ctx ends
// or handle fails. Lines may be of any length.
func serveLines(ctx context.Context, in io.Reader, handle func(line []byte) error) error {
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- line:
				case <-done:
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line := <-lines:
			if err := handle(line); err != nil {
				return err
			}
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("demo: reading input: %w", err)
		}
	}
}

// decodeLine parses one line. It answers lines that are not JSON-RPC
// messages itself and then reports ok=false.
func decodeLine(c *lineConn, line []byte) (m message, ok bool, err error) {
	if err := json.Unmarshal(line, &m); err != nil {
		return m, false, c.failCode(nil, codeParseError, "parse error: "+err.Error())
	}
	if m.JSONRPC != "2.0" {
		return m, false, c.failCode(m.ID, codeInvalidRequest, "invalid request: jsonrpc must be \"2.0\"")
	}
	return m, true, nil
}

// textResult builds a tool result holding a single text content.
func textResult(text string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
}

// progressParams builds notifications/progress parameters for a raw token.
func progressParams(token json.RawMessage, progress, total int, msg string) map[string]any {
	p := map[string]any{"progressToken": token, "progress": progress, "total": total}
	if msg != "" {
		p["message"] = msg
	}
	return p
}

// initializeResult answers initialize with the protocol version the client
// asked for.
func initializeResult(params json.RawMessage, name string) (map[string]any, error) {
	var p struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
	}
	version := p.ProtocolVersion
	if len(version) == 0 || string(version) == "null" {
		version = json.RawMessage(strconv.Quote("2025-11-25"))
	}
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
		"serverInfo":      map[string]any{"name": name, "version": "1.0.0"},
	}, nil
}
