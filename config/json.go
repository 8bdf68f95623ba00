package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"gopkg.in/yaml.v3"
)

// The configs other MCP clients write (Claude Desktop, Cursor, VS Code, TENEX) are JSON,
// and the editors' ones JSONC: comments and trailing commas allowed. They are decoded
// into the same node tree as YAML, so one reader handles both and every value keeps
// its line. yaml.v3 is not used for JSON: it rejects valid JSON such as "\/" escapes.

// syntaxError is a syntax error at a known line.
type syntaxError struct {
	line int
	msg  string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// looksLikeJSON reports whether data is a JSON object: its first significant byte is '{'.
// A YAML config never starts so (a flow mapping at the top of a config is JSON anyway).
func looksLikeJSON(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '/': // a JSONC file may open with a comment
			return bytes.Contains(data, []byte("{"))
		}
		return c == '{'
	}
	return false
}

// decodeJSON parses a JSON or JSONC document into a node tree with line numbers.
func decodeJSON(data []byte) (*yaml.Node, error) {
	clean := stripJSONC(bytes.TrimPrefix(data, []byte("\uFEFF")))
	b := jsonBuilder{src: clean, dec: json.NewDecoder(bytes.NewReader(clean))}
	b.dec.UseNumber()
	for i, c := range clean {
		if c == '\n' {
			b.newlines = append(b.newlines, i)
		}
	}
	n, err := b.value()
	if err != nil {
		return nil, b.syntax(err)
	}
	if _, err := b.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &syntaxError{line: b.line(b.next()), msg: "more content after the end of the JSON object; remove it"}
	}
	return n, nil
}

// jsonBuilder turns decoder tokens into nodes.
type jsonBuilder struct {
	src      []byte
	dec      *json.Decoder
	newlines []int // offsets of '\n' in src
}

// next is the offset where the next token starts: past whitespace and the ':' and ','
// the decoder skips.
func (b *jsonBuilder) next() int {
	i := int(b.dec.InputOffset())
	for i < len(b.src) {
		switch b.src[i] {
		case ' ', '\t', '\r', '\n', ':', ',':
			i++
			continue
		}
		break
	}
	return i
}

// line is the 1-based line of offset.
func (b *jsonBuilder) line(offset int) int {
	return sort.SearchInts(b.newlines, offset) + 1
}

// syntax places a decoder error on its line.
func (b *jsonBuilder) syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// The offset is just past the offending byte when that byte is inside a
		// token, and at the end of the previous token when the offending byte
		// starts a new one: then it is the next byte that is not a space.
		off := min(int(se.Offset), len(b.src))
		if off > 0 && !isJSONSpace(b.src[off-1]) {
			off--
		} else {
			for off < len(b.src) && isJSONSpace(b.src[off]) {
				off++
			}
		}
		return &syntaxError{line: b.line(off), msg: se.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &syntaxError{line: b.line(len(b.src)), msg: "the JSON ends before it is complete (a '}' or ']' is missing)"}
	}
	var st *syntaxError
	if errors.As(err, &st) {
		return st
	}
	return &syntaxError{line: b.line(b.next()), msg: err.Error()}
}

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 64

func (b *jsonBuilder) value() (*yaml.Node, error) { return b.valueAt(0) }

func (b *jsonBuilder) valueAt(depth int) (*yaml.Node, error) {
	if depth > maxJSONDepth {
		return nil, &syntaxError{line: b.line(b.next()), msg: fmt.Sprintf("nested more than %d levels deep", maxJSONDepth)}
	}
	start := b.next()
	tok, err := b.dec.Token()
	if err != nil {
		return nil, err
	}
	line, col := b.line(start), start-b.lineStart(start)+1
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: col, Style: yaml.FlowStyle}
			for b.dec.More() {
				kstart := b.next()
				kt, err := b.dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, &syntaxError{line: b.line(kstart), msg: "an object key must be a string"}
				}
				k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Style: yaml.DoubleQuotedStyle,
					Line: b.line(kstart), Column: kstart - b.lineStart(kstart) + 1}
				val, err := b.valueAt(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, k, val)
			}
			_, err := b.dec.Token() // '}'
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: line, Column: col, Style: yaml.FlowStyle}
			for b.dec.More() {
				item, err := b.valueAt(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, item)
			}
			_, err := b.dec.Token() // ']'
			return n, err
		}
		return nil, &syntaxError{line: line, msg: fmt.Sprintf("unexpected %q", v)}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Style: yaml.DoubleQuotedStyle, Line: line, Column: col}, nil
	case json.Number:
		tag := "!!float"
		if _, err := v.Int64(); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String(), Line: line, Column: col}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v), Line: line, Column: col}, nil
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line, Column: col}, nil
	}
}

// lineStart is the offset of the first byte of offset's line.
func (b *jsonBuilder) lineStart(offset int) int {
	i := sort.SearchInts(b.newlines, offset)
	if i == 0 {
		return 0
	}
	return b.newlines[i-1] + 1
}

// stripJSONC blanks out what JSONC allows and JSON does not: // and /* */ comments, and
// a comma before a closing '}' or ']'. Blanked bytes become spaces and newlines stay, so
// every offset and line of the rest is unchanged.
func stripJSONC(data []byte) []byte {
	out := bytes.Clone(data)
	inString := false
	lastComma := -1 // offset of a comma that may turn out to be trailing
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString, lastComma = true, -1
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out); i++ {
				if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i++
					break
				}
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
		case c == ',':
			lastComma = i
		case c == '}' || c == ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		default:
			lastComma = -1
		}
	}
	return out
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
