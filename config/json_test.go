package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestDecodeJSONKeepsLines(t *testing.T) {
	n, err := decodeJSON([]byte("{\n  \"a\": {\n    \"url\": \"https://x//y\", // not a comment in the string, one after it\n    \"n\": [1, 2.5, true, null]\n  }\n}\n"))
	require.NoError(t, err)
	a := topPairs(n)["a"]
	assert.Equal(t, 2, a.k.Line)
	f := topPairs(a.v)
	assert.Equal(t, "https://x//y", f["url"].v.Value)
	assert.Equal(t, 3, f["url"].v.Line)
	list := f["n"].v
	require.Len(t, list.Content, 4)
	assert.Equal(t, []string{"!!int", "!!float", "!!bool", "!!null"}, []string{list.Content[0].Tag, list.Content[1].Tag, list.Content[2].Tag, list.Content[3].Tag})
	assert.Equal(t, 4, list.Line)
	assert.Equal(t, yaml.SequenceNode, list.Kind)
}

func TestStripJSONC(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": "b // c"}`, `{"a": "b // c"}`},
		{`{"a": "\"/*"} // x`, `{"a": "\"/*"}     `},
		{"{\"a\": 1, /* x\ny */ \"b\": 2,\n}", "{\"a\": 1,     \n     \"b\": 2 \n}"},
		{`[1, 2, ]`, `[1, 2  ]`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(stripJSONC([]byte(tt.in))), tt.in)
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	tests := []struct {
		in   string
		line int
		want string
	}{
		{"{\n\"a\": 1\n\"b\": 2}", 3, "after object key:value pair"},
		{"{\n\"a\": [1, 2\n", 3, "ends before it is complete"},
		{"{\"a\": 1}\n{\"b\": 2}", 2, "more content after the end"},
		{"{\n\n  \"a\": tru }", 3, "invalid character"},
	}
	for _, tt := range tests {
		_, err := decodeJSON([]byte(tt.in))
		var se *syntaxError
		require.ErrorAs(t, err, &se, tt.in)
		assert.Equal(t, tt.line, se.line, "%q: %v", tt.in, err)
		assert.Contains(t, se.msg, tt.want)
	}
}

func TestYAMLSyntaxErrorLines(t *testing.T) {
	tests := []struct {
		text string
		line int
	}{
		{"version: 1\nservers:\n  a:\n    command: x\n   args: [y]\n", 5},
		{"version: 1\nservers:\n  a: [b\n", 3},
		{"version: 1\nservers:\n  a:\n    command: \"x\n    args: [y]\n", 4},
		{"version: 1\nservers:\n  a:\n    command: x\n  b: c: d\n", 5},
		{"version: 1\n\tservers: {}\n", 2},
	}
	for _, tt := range tests {
		_, err := decodeYAML([]byte(tt.text))
		require.Error(t, err, tt.text)
		line, _ := yamlSyntaxError([]byte(tt.text), err)
		assert.Equal(t, tt.line, line, "%q: %v", tt.text, err)
	}
}
