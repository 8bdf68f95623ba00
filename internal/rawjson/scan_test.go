package rawjson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scanSeeds are inputs near the edges of the grammar.
var scanSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{"a":1}x`, `{"a":1} `, `{"a":}`, `{,}`, `{"a":1 "b":2}`,
	`[]`, `[1,]`, `[,1]`, `[1 2]`, `"x"`, `"\u00e9\n\"\\\/"`, `"\u00g0"`, `"\x"`, "\"a\x01\"", "\"\xff\xfe\"",
	`0`, `-0`, `01`, `-`, `1.`, `1.5e`, `1.5e+3`, `1E-7`, `-.5`, `.5`, `1e3.0`,
	`true`, `tru`, `false`, `null`, `nul`, `nullx`, ``, ` `, `{"a":[{"b":{"c":[null,true,false,"s",-1.5e9]}}]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
	`{"a\u0062":1,"b":2,"ab":3}`, `{"a":1,"a":2}`,
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		assert.Equal(t, json.Valid([]byte(s)), Valid([]byte(s)), "%q", s)
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	assert.True(t, Valid([]byte(deep)))
	deeper := "[" + deep + "]"
	assert.Equal(t, json.Valid([]byte(deeper)), Valid([]byte(deeper)), "one level past the bound")
	obj := `{"a":` + deep + `}`
	assert.Equal(t, json.Valid([]byte(obj)), membersErr([]byte(obj)) == nil)
}

func TestObjectMembers(t *testing.T) {
	data := []byte(` {"a\u0062" : [1, 2] ,"c":"x\"y", "n":null} `)
	o := NewObject(data)
	var got []string
	for o.Next() {
		got = append(got, string(o.Name())+"="+string(o.Value()))
		start, end := o.ValueSpan()
		assert.Equal(t, string(o.Value()), string(data[start:end]), "the value's span in the input")
	}
	require.NoError(t, o.Err())
	assert.Equal(t, []string{`ab=[1, 2]`, `c="x\"y"`, `n=null`}, got)

	assert.Equal(t, `2`, string(Member([]byte(`{"a":1,"a":2}`), "a")), "the last of a repeated name, as encoding/json")
	assert.Nil(t, Member([]byte(`{"a":1`), "a"), "not a whole object")
	assert.Nil(t, Member([]byte(`[1]`), "a"))

	o = NewObject([]byte(`[1]`))
	assert.False(t, o.Next())
	assert.ErrorIs(t, o.Err(), ErrNotObject)
}

func TestMentions(t *testing.T) {
	assert.True(t, Mentions([]byte(`{"_meta":{}}`), "_meta"))
	assert.True(t, Mentions([]byte(`{"\u005fmeta":{}}`), "_meta"), "an escaped name may be it")
	assert.False(t, Mentions([]byte(`{"name":"echo","arguments":{"text":"a\nb"}}`), "_meta"))

	// A name over 32 bytes: found whole, not by its first 32 bytes alone,
	// and without an allocation.
	long := "io.modelcontextprotocol/serverInfo"
	assert.True(t, Mentions([]byte(`{"_meta":{"io.modelcontextprotocol/serverInfo":{}}}`), long))
	assert.True(t, Mentions([]byte(`{"x":"io.modelcontextprotocol/serverIn","_meta":{"io.modelcontextprotocol/serverInfo":1}}`), long))
	assert.False(t, Mentions([]byte(`{"_meta":{"io.modelcontextprotocol/serverIn":{}}}`), long))
	assert.False(t, Mentions([]byte(`{"_meta":{"io.modelcontextprotocol/serverIn`), long), "cut short where it matches")
	data := []byte(`{"content":[{"type":"text","text":"hello"}],"_meta":{"io.modelcontextprotocol/serverInfoX":1}}`)
	assert.Zero(t, testing.AllocsPerRun(100, func() { Mentions(data, long) }))
}

func TestString(t *testing.T) {
	for raw, want := range map[string]string{`"plain"`: "plain", `"\u00e9\n"`: "é\n", "\"\xff\"": "\uFFFD", `""`: ""} {
		s, ok := String([]byte(raw))
		assert.True(t, ok, raw)
		assert.Equal(t, want, s, raw)
	}
	for _, raw := range []string{`1`, `null`, `"`, `{}`} {
		_, ok := String([]byte(raw))
		assert.False(t, ok, raw)
	}
}

// membersErr reads data as an Object to its end.
func membersErr(data []byte) error {
	o := NewObject(data)
	for o.Next() {
	}
	return o.Err()
}

// FuzzScan: Valid agrees with json.Valid, and Object with json.Unmarshal
// into a map of raw members, on any input.
func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if Valid(data) != json.Valid(data) {
			t.Fatalf("Valid(%q) = %v, json.Valid says otherwise", data, Valid(data))
		}
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(data, &want)
		got := map[string]json.RawMessage{}
		o := NewObject(data)
		for o.Next() {
			got[string(o.Name())] = o.Value()
		}
		if (o.Err() == nil) != (wantErr == nil && want != nil) {
			t.Fatalf("Object(%q): err %v, encoding/json: %v", data, o.Err(), wantErr)
		}
		if o.Err() != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("Object(%q): %d members, encoding/json %d", data, len(got), len(want))
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Fatalf("Object(%q): member %q = %q, encoding/json %q", data, k, got[k], v)
			}
		}
	})
}

func TestMembers(t *testing.T) {
	names := []string{"a", "b", "c"}
	tests := []struct {
		name, obj string
		want      [3]string // "" for a member not read
		err       error
	}{
		{name: "each", obj: `{"b": [1, 2], "a": "x", "z": 0}`, want: [3]string{`"x"`, `[1, 2]`, ""}},
		{name: "the last of a repeated name", obj: `{"a": 1, "a": 2}`, want: [3]string{"2", "", ""}},
		{name: "none", obj: `{}`},
		{name: "not an object", obj: `[1]`, err: ErrNotObject},
		{name: "read up to the error", obj: `{"c": true, "a": }`, want: [3]string{"", "", "true"}, err: errSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var values [3][]byte
			err := Members([]byte(tt.obj), names, values[:])
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			for i := range names {
				assert.Equal(t, tt.want[i], string(values[i]), names[i])
			}
		})
	}
}

// A string is scanned eight bytes at a time: every byte a scan must stop
// at is found wherever it falls in a block, and none next to them is
// taken for one.
func TestStringBlocks(t *testing.T) {
	for _, c := range []byte{'"', '\\', 0x00, 0x01, 0x1f, 0x20, 0x21, '#', '[', ']', 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff} {
		for at := 0; at < 20; at++ {
			for _, tail := range []string{`"`, `x"`, `\n"`, `0123456789abcdef"`} {
				inner := []byte(strings.Repeat("a", at))
				inner = append(inner, c)
				data := append(append([]byte{'"'}, inner...), tail...)
				assert.Equal(t, json.Valid(data), Valid(data), "%q", data)
				end, ok := skipString(data, 0)
				if ok {
					assert.True(t, json.Valid(data[:end]), "%q ends at %d", data, end)
				}
			}
		}
	}
}
