package rawjson

import (
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestEdits(t *testing.T) {
	tests := []struct {
		name, obj       string
		set, add, minus string
	}{
		{"empty", `{}`, `{"k":"v"}`, `{"k":1}`, `{}`},
		{"spaces kept", ` { "a" : [1, 2] } `, ` {"k":"v", "a" : [1, 2] } `, ` {"k":1, "a" : [1, 2] } `, ` { "a" : [1, 2] } `},
		{"replaced in place", `{"z":true,"k":{"x":1},"a":null}`, `{"z":true,"k":"v","a":null}`, `{"z":true,"k":{"x":1},"a":null}`, `{"z":true,"a":null}`},
		{"every repeat", `{"k":1,"b":2,"k":3}`, `{"k":"v","b":2,"k":"v"}`, `{"k":1,"b":2,"k":3}`, `{"b":2}`},
		{"escaped name", `{"\u006b":0,"b":"\u00e9"}`, `{"\u006b":"v","b":"\u00e9"}`, `{"\u006b":0,"b":"\u00e9"}`, `{"b":"\u00e9"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, ok := Set([]byte(tt.obj), "k", func([]byte) []byte { return []byte(`"v"`) })
			assert.True(t, ok)
			assert.Equal(t, tt.set, string(set))
			assert.Equal(t, tt.add, string(Add([]byte(tt.obj), "k", []byte(`1`))))
			assert.Equal(t, tt.minus, string(Without([]byte(tt.obj), "k")))
		})
	}
}

func TestEditsLeaveWhatIsNotAnObject(t *testing.T) {
	for _, s := range []string{``, `[]`, `"k"`, `{"k":1}x`, `{"k":}`, `null`} {
		_, ok := Set([]byte(s), "k", func([]byte) []byte { return []byte(`2`) })
		assert.False(t, ok, "Set(%q)", s)
		assert.Equal(t, s, string(Add([]byte(s), "k", []byte(`2`))), "Add(%q)", s)
		assert.Equal(t, s, string(Without([]byte(s), "k")), "Without(%q)", s)
		_, replaced := Replace([]byte(s), "k", func([]byte) ([]byte, bool) { return []byte(`2`), true })
		assert.False(t, replaced, "Replace(%q)", s)
		assert.False(t, Has([]byte(s), "k"), "Has(%q)", s)
	}
}

// FuzzEdits: on any input that encoding/json decodes as an object, each
// edit changes the one member it names and no other, and its output is
// valid JSON; on anything else it changes nothing.
func FuzzEdits(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s), "a")
	}
	f.Add([]byte(`{"_meta":{"x":1},"content":[]}`), "_meta")
	f.Add([]byte(` {"a" :1 , "b":[{"a":2}]}`), "a")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		if !utf8.ValidString(name) {
			return // names are the aggregator's own, always UTF-8
		}
		var before map[string]json.RawMessage
		if json.Unmarshal(data, &before) != nil || before == nil {
			if _, ok := Set(data, name, func([]byte) []byte { return []byte(`0`) }); ok {
				t.Fatalf("Set(%q) edited what is not an object", data)
			}
			if string(Add(data, name, []byte(`0`))) != string(data) || string(Without(data, name)) != string(data) {
				t.Fatalf("Add or Without edited %q, which is not an object", data)
			}
			return
		}
		decode := func(op string, out []byte) map[string]json.RawMessage {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("%s(%q, %q) = %q: %v", op, data, name, out, err)
			}
			return m
		}
		others := func(op string, got map[string]json.RawMessage) {
			for k, v := range before {
				if k != name && string(got[k]) != string(v) {
					t.Fatalf("%s(%q, %q): member %q changed from %q to %q", op, data, name, k, v, got[k])
				}
			}
		}
		_, had := before[name]
		if Has(data, name) != had {
			t.Fatalf("Has(%q, %q) = %v", data, name, !had)
		}

		set, ok := Set(data, name, func([]byte) []byte { return []byte(`"set"`) })
		if !ok {
			t.Fatalf("Set(%q, %q) refused an object", data, name)
		}
		got := decode("Set", set)
		if string(got[name]) != `"set"` || len(got) != len(before)+map[bool]int{true: 0, false: 1}[had] {
			t.Fatalf("Set(%q, %q) = %q", data, name, set)
		}
		others("Set", got)

		added := Add(data, name, []byte(`7`))
		got = decode("Add", added)
		if had && string(added) != string(data) {
			t.Fatalf("Add(%q, %q) changed a member it has: %q", data, name, added)
		}
		if !had && string(got[name]) != `7` {
			t.Fatalf("Add(%q, %q) = %q", data, name, added)
		}
		others("Add", got)

		got = decode("Without", Without(data, name))
		want := maps.Clone(before)
		delete(want, name)
		if len(got) != len(want) {
			t.Fatalf("Without(%q, %q) = %v", data, name, got)
		}
		others("Without", got)
	})
}

func TestWithoutFuncAndEmpty(t *testing.T) {
	obj := []byte(`{"io.x/a":1, "keep":[2],"io.x/b":{}}`)
	got := WithoutFunc(obj, func(name []byte) bool { return len(name) > 4 && string(name[:5]) == "io.x/" })
	assert.Equal(t, `{"keep":[2]}`, string(got))
	assert.False(t, Empty(got))
	assert.True(t, Empty(WithoutFunc(got, func([]byte) bool { return true })))
	assert.True(t, Empty([]byte(` { } `)))
	assert.False(t, Empty([]byte(`[]`)), "an array is no empty object")
	assert.False(t, Empty([]byte(`{`)))
}

func TestEditsInOnePass(t *testing.T) {
	complete := Edit{Name: "resultType", Value: func(old []byte) []byte {
		if old != nil {
			return old
		}
		return []byte(`"complete"`)
	}}
	meta := Edit{Name: "_meta", Value: func(old []byte) []byte {
		if old == nil {
			return []byte(`{"s":1}`)
		}
		out, _ := Set(old, "s", func([]byte) []byte { return []byte(`1`) })
		return out
	}}
	drop := Edit{Name: "gone", Value: func([]byte) []byte { return nil }}
	for _, tt := range []struct{ in, want string }{
		{`{}`, `{"resultType":"complete","_meta":{"s":1}}`},
		{`{"content":[ 1 ]}`, `{"resultType":"complete","_meta":{"s":1},"content":[ 1 ]}`},
		{`{"resultType":"input_required", "_meta" : {"x":2,"s":0}}`, `{"resultType":"input_required", "_meta" : {"x":2,"s":1}}`},
		{`{"a":1, "gone":2, "b":3}`, `{"resultType":"complete","_meta":{"s":1},"a":1,"b":3}`},
		{`{"gone":2}`, `{"resultType":"complete","_meta":{"s":1}}`},
		{`[1]`, `[1]`},
	} {
		assert.Equal(t, tt.want, string(Edits([]byte(tt.in), complete, meta, drop)), "Edits(%s)", tt.in)
	}
	assert.Equal(t, `{"a":1,"b":3}`, string(Edits([]byte(`{"a":1,"gone":2,"b":3}`), drop)))
	assert.Equal(t, `{}`, string(Edits([]byte(`{"gone":2}`), drop)))
}

// FuzzEditsInOnePass: Edits agrees with decoding into a map, changing the
// members named and no other, and keeps its output valid.
func FuzzEditsInOnePass(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":1,"b":[2],"c":{"d":3}}`))
	f.Add([]byte(`{"b":1,"b":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before map[string]json.RawMessage
		if json.Unmarshal(data, &before) != nil || before == nil {
			if string(Edits(data, Edit{Name: "a", Value: func([]byte) []byte { return []byte(`0`) }})) != string(data) {
				t.Fatalf("Edits changed %q, which is not an object", data)
			}
			return
		}
		out := Edits(data,
			Edit{Name: "a", Value: func([]byte) []byte { return []byte(`"a"`) }},
			Edit{Name: "b", Value: func([]byte) []byte { return nil }},
			Edit{Name: "c", Value: func(old []byte) []byte {
				if old == nil {
					return []byte(`"c"`)
				}
				return old
			}},
		)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("Edits(%q) = %q: %v", data, out, err)
		}
		want := maps.Clone(before)
		want["a"] = json.RawMessage(`"a"`)
		delete(want, "b")
		if _, ok := want["c"]; !ok {
			want["c"] = json.RawMessage(`"c"`)
		}
		if len(got) != len(want) {
			t.Fatalf("Edits(%q) = %q", data, out)
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Fatalf("Edits(%q) = %q: member %q is %q, want %q", data, out, k, got[k], v)
			}
		}
	})
}

// FuzzKeep: what Keep returns is one valid object with exactly the
// members kept, each with its bytes; an invalid object is refused.
func FuzzKeep(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s), "a")
	}
	f.Add([]byte(`{"io.modelcontextprotocol/ui":{"mimeTypes":[]},"b":null,"c":false}`), "b")
	f.Fuzz(func(t *testing.T, data []byte, drop string) {
		// By name alone: a repeated name is then kept or dropped whole.
		keep := func(name string, _ []byte) bool { return name != drop }
		var before map[string]json.RawMessage
		if json.Unmarshal(data, &before) != nil || before == nil {
			if _, ok := Keep(data, keep); ok {
				t.Fatalf("Keep(%q) took what is not an object", data)
			}
			return
		}
		out, ok := Keep(data, keep)
		if !ok {
			t.Fatalf("Keep(%q) refused a valid object", data)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("Keep(%q) = %q: %v", data, out, err)
		}
		for k := range before {
			want := k != drop
			if _, has := got[k]; has != want {
				t.Fatalf("Keep(%q) = %q: member %q kept %v, want %v", data, out, k, has, want)
			}
		}
		for k, v := range got {
			if string(before[k]) != string(v) {
				t.Fatalf("Keep(%q) = %q: member %q changed from %q to %q", data, out, k, before[k], v)
			}
		}
	})
}

func TestKeep(t *testing.T) {
	carried := func(name string, value []byte) bool { return name != "x" && value[0] == '{' }
	for _, tc := range []struct{ in, want string }{
		{`{"b":{"z":1,"a":2},"x":{},"a":null,"c":{}}`, `{"b":{"z":1,"a":2},"c":{}}`},
		{`{"b":{}, "c" : {}}`, `{"b":{}, "c" : {}}`},
		{`{}`, `{}`},
		{`{"x":{}}`, `{}`},
	} {
		got, ok := Keep([]byte(tc.in), carried)
		if !ok || string(got) != tc.want {
			t.Errorf("Keep(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
	for _, bad := range []string{``, `[1]`, `{"a":`, `{"a":1} x`} {
		if _, ok := Keep([]byte(bad), carried); ok {
			t.Errorf("Keep(%q) took what is not one object", bad)
		}
	}
}
