package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendToArray(t *testing.T) {
	item := []byte(`{"type":"text","text":"note"}`)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"appended, the rest untouched",
			`{"z":1, "content" : [ {"type":"text","text":"a"} ] ,"a":{"b":2,"a":1},"n":12345678901234567890}`,
			`{"z":1, "content" : [ {"type":"text","text":"a"} ,{"type":"text","text":"note"}] ,"a":{"b":2,"a":1},"n":12345678901234567890}`},
		{"empty array", `{"content":[ ]}`, `{"content":[ {"type":"text","text":"note"}]}`},
		{"no such member", `{"isError":true}`, `{"isError":true,"content":[{"type":"text","text":"note"}]}`},
		{"empty object", ` { } `, ` { "content":[{"type":"text","text":"note"}]} `},
		{"not an array", `{"content":null,"x":1}`, `{"content":[{"type":"text","text":"note"}],"x":1}`},
		{"the last of twice", `{"content":[1],"content":[]}`, `{"content":[1],"content":[{"type":"text","text":"note"}]}`},
		{"escaped name", `{"con\u0074ent":[1]}`, `{"con\u0074ent":[1,{"type":"text","text":"note"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AppendToArray([]byte(tc.in), "content", item)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(out))
		})
	}
	for _, bad := range []string{``, `[]`, `{"content":[}`, `{"a":1} x`, `"s"`} {
		out, err := AppendToArray([]byte(bad), "content", item)
		assert.Error(t, err, "%q", bad)
		assert.Equal(t, bad, string(out), "returned as it is")
	}
	out, err := AppendToArray([]byte(`{"content":[0]}`), "content", []byte(`1`), []byte(`2`))
	require.NoError(t, err)
	assert.Equal(t, `{"content":[0,1,2]}`, string(out), "items in order")
}

// FuzzAppendToArray: whatever the input, the output of a valid object is
// valid JSON whose members are the input's, byte for byte, but the array,
// which holds what it held and the item after; and it differs from the
// input in one place only. Anything else is returned as it is, with an
// error. Seeds are in testdata/fuzz/FuzzAppendToArray.
func FuzzAppendToArray(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"a"}],"isError":false}`))
	item := []byte(`{"type":"text","text":"reminder"}`)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := AppendToArray(in, "content", item)
		if err != nil {
			if !bytes.Equal(in, out) {
				t.Fatalf("an error, but the input changed: %q -> %q", in, out)
			}
			// encoding/json reads null into a map as no map at all: not an object.
			var v map[string]json.RawMessage
			if json.Unmarshal(in, &v) == nil && v != nil {
				t.Fatalf("%q is an object encoding/json reads, but: %v", in, err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("not valid JSON: %q -> %q", in, out)
		}
		var before, after map[string]json.RawMessage
		if err := json.Unmarshal(in, &before); err != nil {
			t.Fatalf("%q is taken, but encoding/json does not read it: %v", in, err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		if len(after) != len(before)+boolInt(before["content"] == nil) {
			t.Fatalf("members: %q -> %q", in, out)
		}
		for k, v := range before {
			if k != "content" && !bytes.Equal(v, after[k]) {
				t.Fatalf("member %q changed: %q -> %q", k, in, out)
			}
		}
		var was, now []json.RawMessage
		_ = json.Unmarshal(before["content"], &was) // nil unless an array
		if err := json.Unmarshal(after["content"], &now); err != nil {
			t.Fatalf("content is no array: %q", out)
		}
		if len(now) != len(was)+1 || !bytes.Equal(now[len(now)-1], item) {
			t.Fatalf("content: %q -> %q", in, out)
		}
		for i := range was {
			if !bytes.Equal(was[i], now[i]) {
				t.Fatalf("content item %d changed: %q -> %q", i, in, out)
			}
		}
		// One place differs: what is left of the input between the
		// common prefix and suffix is nothing, or the value replaced.
		p := 0
		for p < len(in) && p < len(out) && in[p] == out[p] {
			p++
		}
		s := 0
		for s < len(in)-p && s < len(out)-p && in[len(in)-1-s] == out[len(out)-1-s] {
			s++
		}
		if middle := in[p : len(in)-s]; len(middle) > 0 && !bytes.Contains(before["content"], middle) {
			t.Fatalf("bytes beyond the array changed: %q -> %q", in, out)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestEditItems(t *testing.T) {
	upper := func(item []byte) ([]byte, bool) {
		if string(item) == `"a"` {
			return []byte(`"A"`), true
		}
		return nil, false
	}
	for _, tc := range []struct {
		in, want string
		changed  bool
	}{
		{`{"contents":["a", "b" ,"a"],"x":["a"]}`, `{"contents":["A", "b" ,"A"],"x":["a"]}`, true},
		{`{"contents":[ "a" ]}`, `{"contents":[ "A" ]}`, true},
		{`{"contents":[{"a":["a"]},"a"]}`, `{"contents":[{"a":["a"]},"A"]}`, true},
		{`{"contents":["b"]}`, `{"contents":["b"]}`, false},
		{`{"contents":[]}`, `{"contents":[]}`, false},
		{`{"contents":"a"}`, `{"contents":"a"}`, false},
		{`{"contents":["a"],"contents":["b"]}`, `{"contents":["a"],"contents":["b"]}`, false},
		{`{"other":["a"]}`, `{"other":["a"]}`, false},
		{`{"contents":["a"]`, `{"contents":["a"]`, false},
	} {
		got, changed := EditItems([]byte(tc.in), "contents", upper)
		if string(got) != tc.want || changed != tc.changed {
			t.Errorf("EditItems(%s) = %s, %v; want %s, %v", tc.in, got, changed, tc.want, tc.changed)
		}
	}
}

// FuzzEditItems: every item of the array is edited where it stands, and
// nothing else of the object changes.
func FuzzEditItems(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"contents":[{"uri":"ui://a"},1,"x",[2],null],"k":[3]}`))
	f.Add([]byte(`{"contents" : [ ] }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		wrap := func(item []byte) ([]byte, bool) { return append(append([]byte(`[`), item...), ']'), true }
		out, changed := EditItems(data, "contents", wrap)
		var before map[string]json.RawMessage
		if json.Unmarshal(data, &before) != nil || before == nil {
			if changed || string(out) != string(data) {
				t.Fatalf("EditItems(%q) edited what is not an object", data)
			}
			return
		}
		var items []json.RawMessage
		if json.Unmarshal(before["contents"], &items) != nil || len(items) == 0 {
			if changed {
				t.Fatalf("EditItems(%q) = %q: changed without items", data, out)
			}
			return
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("EditItems(%q) = %q: %v", data, out, err)
		}
		var got []json.RawMessage
		if err := json.Unmarshal(after["contents"], &got); err != nil || len(got) != len(items) {
			t.Fatalf("EditItems(%q) = %q: %d items, want %d (%v)", data, out, len(got), len(items), err)
		}
		for i := range items {
			var inner []json.RawMessage
			if json.Unmarshal(got[i], &inner) != nil || len(inner) != 1 || string(inner[0]) != string(items[i]) {
				t.Fatalf("EditItems(%q) = %q: item %d is %q, want [%s]", data, out, i, got[i], items[i])
			}
		}
		for k, v := range before {
			if k != "contents" && string(after[k]) != string(v) {
				t.Fatalf("EditItems(%q) = %q: member %q changed", data, out, k)
			}
		}
	})
}
