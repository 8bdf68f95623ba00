package demo

import (
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

//go:embed testdata/fidelity/*.json
var fidelityFS embed.FS

// fidelityPageSize is how many tools one tools/list page of the fidelity
// server holds.
const fidelityPageSize = 2

// FidelityFixture returns the raw embedded bytes of a fidelity fixture:
// "tools.json" (an object whose "tools" array the fidelity server lists),
// "rich_result.json" (the result of calling its "rich" tool) or "error.json"
// (the JSON-RPC error object its "broken" tool fails with). It returns nil
// for any other name. The bytes are shared: do not modify them.
func FidelityFixture(name string) []byte {
	if strings.ContainsAny(name, `/\`) {
		return nil
	}
	b, err := fidelityFS.ReadFile("testdata/fidelity/" + name)
	if err != nil {
		return nil
	}
	return b
}

// compactFixture returns a fixture without insignificant whitespace, so it
// fits on one line of the stdio transport with every token unchanged.
func compactFixture(name string) (json.RawMessage, error) {
	b := FidelityFixture(name)
	if b == nil {
		return nil, fmt.Errorf("demo: missing fidelity fixture %s", name)
	}
	raw, err := compact(b)
	if err != nil {
		return nil, fmt.Errorf("demo: fidelity fixture %s: %w", name, err)
	}
	return raw, nil
}

type fidelityServer struct {
	conn   *lineConn
	tools  []json.RawMessage
	rich   json.RawMessage
	broken *jsonrpc.Error
	added  int
}

func runFidelity(ctx context.Context, args []string, in io.Reader, out io.Writer, _ io.Writer) error {
	if len(args) != 0 {
		return fmt.Errorf("demo: fidelity takes no arguments, got %q", args)
	}
	s := &fidelityServer{conn: &lineConn{out: out}}
	toolsDoc, err := compactFixture("tools.json")
	if err != nil {
		return err
	}
	var doc struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(toolsDoc, &doc); err != nil {
		return fmt.Errorf("demo: fidelity fixture tools.json: %w", err)
	}
	s.tools = doc.Tools
	if s.rich, err = compactFixture("rich_result.json"); err != nil {
		return err
	}
	broken, err := compactFixture("error.json")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(broken, &s.broken); err != nil {
		return fmt.Errorf("demo: fidelity fixture error.json: %w", err)
	}
	return serveLines(ctx, in, s.handle)
}

func (s *fidelityServer) handle(line []byte) error {
	m, ok, err := s.conn.request(line, "demo-fidelity")
	if !ok {
		return err
	}
	switch m.Method {
	case "tools/list":
		return s.list(m)
	case "tools/call":
		return s.call(m)
	default:
		return s.conn.failCode(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("demo-fidelity/" + strconv.Itoa(offset)))
}

func decodeCursor(cursor string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), "demo-fidelity/")
	if !ok {
		return 0, false
	}
	offset, err := strconv.Atoi(rest)
	if err != nil || offset < 0 {
		return 0, false
	}
	return offset, true
}

func (s *fidelityServer) list(m message) error {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return s.conn.failCode(m.ID, codeInvalidParams, "invalid tools/list params: "+err.Error())
		}
	}
	offset := 0
	if p.Cursor != nil {
		var ok bool
		if offset, ok = decodeCursor(*p.Cursor); !ok || offset > len(s.tools) {
			return s.conn.failCode(m.ID, codeInvalidParams, "invalid cursor")
		}
	}
	end := min(offset+fidelityPageSize, len(s.tools))
	result := map[string]any{"tools": s.tools[offset:end]}
	if end < len(s.tools) {
		result["nextCursor"] = encodeCursor(end)
	}
	return s.conn.respondValue(m.ID, result)
}

func (s *fidelityServer) call(m message) error {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return s.conn.failCode(m.ID, codeInvalidParams, "invalid tools/call params: "+fmt.Sprint(err))
	}
	switch p.Name {
	case "rich":
		return s.conn.respond(m.ID, s.rich)
	case "broken":
		return s.conn.fail(m.ID, s.broken)
	case "add_tool":
		s.added++
		name := "added_" + strconv.Itoa(s.added)
		tool, err := marshal(map[string]any{
			"name":        name,
			"description": "Added at run time by add_tool; echoes its arguments.",
			"inputSchema": map[string]any{"type": "object"},
		})
		if err != nil {
			return err
		}
		s.tools = append(s.tools, tool)
		if err := s.conn.respondValue(m.ID, textResult("added "+name)); err != nil {
			return err
		}
		return s.conn.notify("notifications/tools/list_changed", nil)
	case "progress_then_result":
		if token := p.Meta.ProgressToken; len(token) > 0 && string(token) != "null" {
			for i := 1; i <= 3; i++ {
				if err := s.conn.notify("notifications/progress", progressParams(token, i, 3, fmt.Sprintf("step %d of 3", i))); err != nil {
					return err
				}
			}
		}
		return s.conn.respondValue(m.ID, textResult("ok"))
	}
	if !s.known(p.Name) {
		return s.conn.failCode(m.ID, codeInvalidParams, "unknown tool: "+p.Name)
	}
	// Every other tool echoes its arguments exactly as received.
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	args, err := compact(args)
	if err != nil {
		return err
	}
	return s.conn.respondValue(m.ID, map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": string(args)}},
		"structuredContent": map[string]any{"arguments": args},
	})
}

func (s *fidelityServer) known(name string) bool {
	for _, raw := range s.tools {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Name == name {
			return true
		}
	}
	return false
}
