package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestAppendObject(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []Field
		want   string
	}{
		{"none", nil, `{}`},
		{"values as they are", []Field{{"a", []byte(`{ "b" : [1, 2.50] }`)}, {"<&>", []byte(`"x\u0041"`)}},
			`{"a":{ "b" : [1, 2.50] },"<&>":"x\u0041"}`},
		{"a name escaped", []Field{{"a\"b\n", []byte(`1`)}}, `{"a\"b\n":1}`},
		{"whitespace kept", []Field{{"a", []byte(" true\n")}}, "{\"a\": true\n}"},
		{"not a value", []Field{{"a", nil}, {"b", []byte(`{"c":`)}, {"d", []byte(`1 2`)}, {"e", []byte(`{}`)}},
			`{"a":null,"b":null,"d":null,"e":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, "x"+tc.want, string(AppendObject([]byte("x"), tc.fields...)))
		})
	}
}

func TestAppendArray(t *testing.T) {
	assert.Equal(t, `[]`, string(AppendArray(nil)))
	assert.Equal(t, `[1,{"a" : "<"},null,[]]`, string(AppendArray(nil, []byte(`1`), []byte(`{"a" : "<"}`), []byte(`[`), []byte(`[]`))))
}

// FuzzAppendObject: whatever the value and the name, AppendObject and
// AppendArray write valid JSON after what b held; a valid value comes out
// byte for byte, anything else as null. Seeds are in
// testdata/fuzz/FuzzAppendObject.
func FuzzAppendObject(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s), "name")
	}
	f.Fuzz(func(t *testing.T, value []byte, name string) {
		prefix := []byte(`{"x":`)
		want := []byte("null")
		if json.Valid(value) {
			want = bytes.TrimSpace(value)
		}

		out := AppendObject(bytes.Clone(prefix), Field{"first", value}, Field{name, value}, Field{"last", []byte(`0`)})
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("what b held changed: %q", out)
		}
		obj := out[len(prefix):]
		var got map[string]json.RawMessage
		if err := json.Unmarshal(obj, &got); err != nil {
			t.Fatalf("AppendObject(%q, %q) = %q: %v", name, value, obj, err)
		}
		if !bytes.Equal(got["first"], want) || string(got["last"]) != "0" {
			t.Fatalf("AppendObject(%q, %q) = %q: first %q, last %q", name, value, obj, got["first"], got["last"])
		}
		if utf8.ValidString(name) && !bytes.Equal(got[name], want) {
			t.Fatalf("AppendObject(%q, %q) = %q: the member named %q is %q", name, value, obj, name, got[name])
		}

		arr := AppendArray(nil, value, []byte(`0`), value)
		var items []json.RawMessage
		if err := json.Unmarshal(arr, &items); err != nil {
			t.Fatalf("AppendArray(%q) = %q: %v", value, arr, err)
		}
		if len(items) != 3 || !bytes.Equal(items[0], want) || string(items[1]) != "0" || !bytes.Equal(items[2], want) {
			t.Fatalf("AppendArray(%q) = %q", value, arr)
		}
	})
}
