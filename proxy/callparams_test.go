package proxy

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
)

func TestParseCallParams(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
		want     callParams
	}{
		{"name and arguments", `{"name":"echo","arguments":{"text":"hi"}}`, true,
			callParams{Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}},
		{"arguments kept byte for byte", `{ "arguments" : {"b":1, "a":"<&>"} , "name":"e\u0063ho"}`, true,
			callParams{Name: "echo", Arguments: json.RawMessage(`{"b":1, "a":"<&>"}`)}},
		{"null arguments forwarded as null", `{"name":"echo","arguments":null}`, true,
			callParams{Name: "echo", Arguments: json.RawMessage(`null`)}},
		{"_meta members it reads raw", `{"name":"echo","_meta":{"progressToken":7,"k":{"x":[1]},"` + LeaseMetaKey + `": "c" }}`, true,
			callParams{Name: "echo", Token: json.RawMessage(`7`), Lease: json.RawMessage(`"c"`)}},
		{"a repeated _meta member counts last", `{"name":"echo","_meta":{"progressToken":7,"progressToken":"t"}}`, true,
			callParams{Name: "echo", Token: json.RawMessage(`"t"`)}},
		{"_meta not an object after its members", `{"name":"echo","_meta":{"progressToken":7,}}`, false, callParams{}},
		{"null _meta", `{"name":"echo","_meta":null}`, true, callParams{Name: "echo"}},
		{"a repeated name counts last", `{"name":"a","name":"echo"}`, true, callParams{Name: "echo"}},
		{"no name", `{"arguments":{}}`, false, callParams{}},
		{"empty name", `{"name":""}`, false, callParams{}},
		{"null name", `{"name":null}`, false, callParams{}},
		{"name not a string", `{"name":3}`, false, callParams{}},
		{"_meta not an object", `{"name":"echo","_meta":[1]}`, false, callParams{}},
		{"params an array", `["echo"]`, false, callParams{}},
		{"no params", ``, false, callParams{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseCallParams(json.RawMessage(tc.in), nil)
			assert.Equal(t, tc.ok, ok)
			if tc.ok {
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

// With the catalog, a call's tool is looked up as its params are read: a
// name written as it reads is the entry's own string, and copies nothing;
// one written with escapes is decoded, then looked up; one no server
// exports has no entry.
func TestParseCallParamsLooksTheToolUp(t *testing.T) {
	echo := &catalog.Entry{Exported: "echo", Server: "s", Original: "echo", Raw: json.RawMessage(`{"name":"echo"}`)}
	cat := catalog.Empty().WithServer("s", []*catalog.Entry{echo})

	got, ok := parseCallParams(json.RawMessage(`{"name":"echo","arguments":{}}`), cat)
	require.True(t, ok)
	assert.Same(t, echo, got.Entry)
	assert.Equal(t, unsafe.StringData(echo.Exported), unsafe.StringData(got.Name), "the entry's own string")

	got, ok = parseCallParams(json.RawMessage(`{"name":"e\u0063ho"}`), cat)
	require.True(t, ok)
	assert.Same(t, echo, got.Entry)
	assert.Equal(t, "echo", got.Name)

	got, ok = parseCallParams(json.RawMessage(`{"name":"nope"}`), cat)
	require.True(t, ok)
	assert.Nil(t, got.Entry)
	assert.Equal(t, "nope", got.Name)

	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}`)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = parseCallParams(params, cat) }))
}
