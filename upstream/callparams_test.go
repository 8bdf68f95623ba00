package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func withheldForTest(key []byte) bool {
	return string(key) == "progressToken" || bytes.HasPrefix(key, []byte("io.modelcontextprotocol/"))
}

// A tools/call's params go upstream as the caller sent them, edited where
// they stand: the name, the arguments, the _meta keys withheld; a null
// _meta or task left out.
func TestCallParams(t *testing.T) {
	tests := []struct {
		name string
		call Call
		want string
	}{
		{"no params: written from nothing", Call{Name: "t", Arguments: json.RawMessage(`{"a":1}`)}, `{"name":"t","arguments":{"a":1}}`},
		{"no params, no arguments", Call{Name: "t"}, `{"name":"t"}`},
		{"the name replaced where it stands, the rest byte for byte",
			Call{Name: "echo", Params: json.RawMessage(`{"x-unknown" : [1, "two"],"name":"srv_echo","arguments":{"b":1,"a":"<&>"},"task":{"ttl":5}}`), Arguments: json.RawMessage(`{"b":1,"a":"<&>"}`)},
			`{"x-unknown" : [1, "two"],"name":"echo","arguments":{"b":1,"a":"<&>"},"task":{"ttl":5}}`},
		{"_meta kept byte for byte without a withheld key",
			Call{Name: "t", Params: json.RawMessage(`{"name":"t","_meta":{"z":1,"a":12345678901234567890123}}`), Withhold: withheldForTest},
			`{"name":"t","_meta":{"z":1,"a":12345678901234567890123}}`},
		{"withheld keys taken out, the others in their order",
			Call{Name: "t", Params: json.RawMessage(`{"name":"t","_meta":{"z":1,"progressToken":7,"io.modelcontextprotocol/x":{},"a":2}}`), Withhold: withheldForTest},
			`{"name":"t","_meta":{"z":1,"a":2}}`},
		{"a _meta of withheld keys alone left out",
			Call{Name: "t", Params: json.RawMessage(`{"name":"t","_meta":{"progressToken":7},"k":true}`), Withhold: withheldForTest},
			`{"name":"t","k":true}`},
		{"an empty _meta stays", Call{Name: "t", Params: json.RawMessage(`{"name":"t","_meta":{}}`), Withhold: withheldForTest}, `{"name":"t","_meta":{}}`},
		{"null _meta and task left out", Call{Name: "t", Params: json.RawMessage(`{"name":"t","_meta":null,"task":null,"k":1}`)}, `{"name":"t","k":1}`},
		{"arguments replaced (a call resolved to the tool it names)",
			Call{Name: "inner", Params: json.RawMessage(`{"name":"mcp_call_tool","arguments":{"name":"inner","arguments":{"q":1}}}`), Arguments: json.RawMessage(`{"q":1}`)},
			`{"name":"inner","arguments":{"q":1}}`},
		{"arguments left out when the call has none", Call{Name: "t", Params: json.RawMessage(`{"name":"t","arguments":{"x":1}}`)}, `{"name":"t"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.call.Request()
			require.NoError(t, err)
			assert.Equal(t, "tools/call", r.Method)
			assert.Equal(t, tc.want, string(r.Params))
		})
	}
	for _, bad := range []string{`[1]`, `"t"`, `{"name":`, `{"a":1} x`} {
		_, err := Call{Name: "t", Params: json.RawMessage(bad)}.Request()
		assert.Error(t, err, bad)
	}
}

// Params the call leaves as they are (a tool exported under its own name,
// no _meta key withheld) go upstream as the very bytes the caller sent,
// without a copy; any change makes one, and leaves the caller's bytes alone.
func TestCallParamsUnchangedAreNotCopied(t *testing.T) {
	params := json.RawMessage(`{ "name" : "t", "arguments":{"a":[1, 2]}, "_meta":{"k":1} }`)
	args := params[bytes.Index(params, []byte(`{"a"`)):bytes.Index(params, []byte(`, "_meta"`))]
	r, err := Call{Name: "t", Params: params, Arguments: args, Withhold: withheldForTest}.Request()
	require.NoError(t, err)
	assert.Equal(t, string(params), string(r.Params))
	assert.Same(t, &params[0], &r.Params[0], "unchanged params are not copied")

	before := string(params)
	for _, call := range []Call{
		{Name: "u", Params: params, Arguments: args},                                              // renamed
		{Name: "t", Params: params, Arguments: json.RawMessage(`{"a":[1,2]}`)},                    // other arguments
		{Name: "t", Params: params, Arguments: args, Withhold: func([]byte) bool { return true }}, // _meta withheld
		{Name: "t", Params: params},                                                               // arguments left out
	} {
		r, err := call.Request()
		require.NoError(t, err)
		assert.NotEqual(t, string(params), string(r.Params))
		assert.Equal(t, before, string(params), "the caller's params are left alone")
	}
}

// FuzzCallParams: whatever object a caller sends, the params that go
// upstream are one valid object with every member but name, arguments,
// _meta and task as the caller sent it.
func FuzzCallParams(f *testing.F) {
	f.Add([]byte(`{"name":"a","arguments":{"x":1},"_meta":{"progressToken":1,"k":2},"task":null,"z":[1]}`))
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/a":1},"name":"b","name":"c"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"_meta":null}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		var before map[string]json.RawMessage
		if json.Unmarshal(params, &before) != nil || before == nil {
			return
		}
		r, err := Call{Name: "tool", Params: params, Arguments: json.RawMessage(`{"q":1}`), Withhold: withheldForTest}.Request()
		if err != nil {
			t.Fatalf("Request(%q): %v", params, err)
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(r.Params, &after); err != nil {
			t.Fatalf("Request(%q) = %q: %v", params, r.Params, err)
		}
		if string(after["name"]) != `"tool"` || string(after["arguments"]) != `{"q":1}` {
			t.Fatalf("Request(%q) = %q: name or arguments not set", params, r.Params)
		}
		for k, v := range before {
			switch k {
			case "name", "arguments", "_meta", "task":
				continue
			}
			if string(after[k]) != string(v) {
				t.Fatalf("Request(%q): member %q changed from %q to %q", params, k, v, after[k])
			}
		}
	})
}

// encodeCallParamsByEdits is encodeCallParams written with rawjson.Edits,
// which it replaced: the two must agree byte for byte.
func encodeCallParamsByEdits(call Call) (json.RawMessage, error) {
	params := call.Params
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	obj := rawjson.NewObject(params)
	for obj.Next() {
	}
	if err := obj.Err(); err != nil {
		return nil, err
	}
	name := rawjson.AppendString(nil, call.Name)
	return rawjson.Edits(params,
		rawjson.Edit{Name: "name", Value: func([]byte) []byte { return name }},
		rawjson.Edit{Name: "arguments", Value: func([]byte) []byte { return call.Arguments }},
		rawjson.Edit{Name: "_meta", Value: func(meta []byte) []byte {
			if meta == nil || string(meta) == "null" {
				return nil
			}
			if call.Withhold == nil {
				return meta
			}
			kept := rawjson.WithoutFunc(meta, call.Withhold)
			if rawjson.Empty(kept) && !rawjson.Empty(meta) {
				return nil
			}
			return kept
		}},
		rawjson.Edit{Name: "task", Value: func(task []byte) []byte {
			if string(task) == "null" {
				return nil
			}
			return task
		}},
	), nil
}

// FuzzCallParamsOnePass: the one pass of encodeCallParams writes what the
// edits it replaced wrote, and refuses what they refused.
func FuzzCallParamsOnePass(f *testing.F) {
	f.Add([]byte(`{"name":"a","arguments":{"x":1},"_meta":{"progressToken":1,"k":2},"task":null,"z":[1]}`), "tool", true, true)
	f.Add([]byte(` { "_meta" : {"io.modelcontextprotocol/a":1} , "name":"b","name":"c" } `), "t\u00e9", false, true)
	f.Add([]byte(`{}`), "", true, false)
	f.Add([]byte(`{"_meta":null,"task":{},"arguments":1,"name":2}`), "x", true, false)
	f.Add([]byte(`{"task":null}`), "x", false, false)
	f.Add([]byte(`[1]`), "x", false, false)
	f.Add([]byte(`{"name":1,"name":2,"name":3,"name":4,"name":5,"task":null,"_meta":null,"arguments":1,"name":6}`), "x", true, false)
	f.Add([]byte(``), "x", true, true)
	f.Fuzz(func(t *testing.T, params []byte, name string, args, withhold bool) {
		call := Call{Name: name, Params: params}
		if args {
			call.Arguments = json.RawMessage(`{"q":1}`)
		}
		if withhold {
			call.Withhold = withheldForTest
		}
		want, wantErr := encodeCallParamsByEdits(call)
		got, err := encodeCallParams(call)
		if err != nil && wantErr == nil && strings.Contains(err.Error(), "send each once") {
			return // repeats past maxCallEdits, which the one pass refuses
		}
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("encodeCallParams(%q): error %v, the edits' %v", params, err, wantErr)
		}
		if string(got) != string(want) {
			t.Fatalf("encodeCallParams(%q) = %q, the edits wrote %q", params, got, want)
		}
	})
}

// TestCallParamsRepeatsBounded: params that repeat the members the call
// changes past maxCallEdits are refused with an error that names the fix;
// up to it, each repeat is changed.
func TestCallParamsRepeatsBounded(t *testing.T) {
	repeated := func(n int) json.RawMessage {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf(`"name":%d`, i)
		}
		return json.RawMessage("{" + strings.Join(members, ",") + "}")
	}
	got, err := encodeCallParams(Call{Name: "t", Params: repeated(maxCallEdits)})
	require.NoError(t, err)
	assert.Equal(t, "{"+strings.Repeat(`"name":"t",`, maxCallEdits-1)+`"name":"t"}`, string(got))

	_, err = encodeCallParams(Call{Name: "t", Params: repeated(maxCallEdits + 1)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "send each once")
}
