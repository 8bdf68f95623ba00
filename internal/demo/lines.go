package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

// JSON-RPC 2.0 error codes used by the hand-written servers.
const (
	codeParseError     = jsonrpc.CodeParseError
	codeInvalidRequest = jsonrpc.CodeInvalidRequest
	codeMethodNotFound = jsonrpc.CodeMethodNotFound
	codeInvalidParams  = jsonrpc.CodeInvalidParams
)

// message is one incoming JSON-RPC message, every payload raw, so that the
// id above all is echoed byte for byte.
type message struct{ jsonrpc.Message }

// isRequest reports whether m expects a response.
func (m *message) isRequest() bool { return m.IsRequest() }

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

// send writes m as one line.
func (c *lineConn) send(m *jsonrpc.Message) error {
	return c.write(jsonrpc.AppendLine(nil, m), m.IsResponse())
}

// respond sends a result, which must be compact JSON, for request id.
func (c *lineConn) respond(id, result json.RawMessage) error {
	return c.send(&jsonrpc.Message{ID: id, Result: result})
}

// respondValue marshals result and sends it for request id.
func (c *lineConn) respondValue(id json.RawMessage, result any) error {
	raw, err := marshal(result)
	if err != nil {
		return err
	}
	return c.respond(id, raw)
}

// fail sends an error response; a missing id is sent as null.
func (c *lineConn) fail(id json.RawMessage, e *jsonrpc.Error) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return c.send(jsonrpc.Failure(id, e))
}

// failCode sends an error response with the given code and message.
func (c *lineConn) failCode(id json.RawMessage, code int, msg string) error {
	return c.fail(id, &jsonrpc.Error{Code: code, Message: msg})
}

// notify sends a notification.
func (c *lineConn) notify(method string, params any) error {
	m, err := jsonrpc.Notification(method, params)
	if err != nil {
		return err
	}
	return c.send(m)
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

// serveLines reads newline-delimited messages from in (jsonrpc's framing)
// and passes each to handle, one at a time, until in reaches EOF, ctx ends
// or handle fails. A line over jsonrpc.DefaultMaxMessage is skipped.
func serveLines(ctx context.Context, in io.Reader, handle func(line []byte) error) error {
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		r := jsonrpc.NewReader(in, 0)
		for {
			line, err := r.Read()
			var tooLong *jsonrpc.TooLongError
			switch {
			case errors.As(err, &tooLong):
				continue
			case err != nil:
				readErr <- err
				return
			}
			select {
			case lines <- append([]byte(nil), line...): // the reader reuses line
			case <-done:
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

// decodeLine parses one line. It answers lines that are not valid JSON-RPC
// messages itself and then reports ok=false.
func decodeLine(c *lineConn, line []byte) (m message, ok bool, err error) {
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		var de *jsonrpc.DecodeError
		if errors.As(err, &de) {
			return m, false, c.send(de.Response())
		}
		return m, false, c.failCode(nil, codeParseError, err.Error())
	}
	return message{*msg}, true, nil
}

// decodeRequest is decodeLine for a server that answers requests alone: ok
// is false for a notification or a response too, which need no answer.
func decodeRequest(c *lineConn, line []byte) (m message, ok bool, err error) {
	m, ok, err = decodeLine(c, line)
	return m, ok && err == nil && m.isRequest(), err
}

// request is decodeRequest for a server that answers initialize (as name)
// and ping as every plain demo server does: it answers those itself, and ok
// is true for the other requests alone.
func (c *lineConn) request(line []byte, name string) (m message, ok bool, err error) {
	m, ok, err = decodeRequest(c, line)
	if !ok {
		return m, false, err
	}
	switch m.Method {
	case "initialize":
		return m, false, c.answerInitialize(m, name)
	case "ping":
		return m, false, c.respond(m.ID, json.RawMessage(`{}`))
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

// answerInitialize answers an initialize request as the server called name;
// invalid params get -32602.
func (c *lineConn) answerInitialize(m message, name string) error {
	result, err := initializeResult(m.Params, name)
	if err != nil {
		return c.failCode(m.ID, codeInvalidParams, "invalid initialize params: "+err.Error())
	}
	return c.respondValue(m.ID, result)
}

// noArgTool is the definition of a tool that takes no arguments.
func noArgTool(name, description string) map[string]any {
	return map[string]any{
		"name":        name,
		"description": description,
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}},
	}
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
