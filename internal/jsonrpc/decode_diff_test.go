package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeEnvelope: the envelope DecodeBorrowed reads by its one switch
// is the one encoding/json reads: the last of a repeated member, names
// compared exactly once unescaped, its id, method and params as given; a
// message it refuses as unparsable is one encoding/json refuses too, or
// one nested too deep.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"id":"two","method":"a","method":"b","params":[1],"params":{"p":2}}`,
		`{"jsonrpc":"2.0","i\u0064":7,"m\u0065thod":"x\u0079","params":{}}`,
		`{"jsonrpc":"2\u002e0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":5}`, `{"jsonrpc":"2.0","id":1.5,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`,
		`{"jsonrpc":"2.0","ID":1,"Method":"m"}`, `{"jsonrpc":"2.0","method":"m","params":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"},"error":null,"result":{}}`,
		` {"jsonrpc" : "2.0" , "id" : 1 , "method" : "m" } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return // encoding/json replaces what is not UTF-8 in the strings it reads
		}
		var m Message
		err := DecodeBorrowed(&m, data)
		var env map[string]json.RawMessage
		jerr := json.Unmarshal(data, &env)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error without a code: %v", err)
			}
			if de.Code == CodeParseError && jerr == nil && !strings.Contains(de.Reason, "nested") {
				t.Fatalf("%q: refused as unparsable (%s), which encoding/json reads", data, de.Reason)
			}
			return
		}
		if jerr != nil {
			t.Fatalf("%q: decoded, but encoding/json refuses it: %v", data, jerr)
		}
		if m.Method != "" {
			var method string
			if json.Unmarshal(env["method"], &method) != nil || method != m.Method {
				t.Fatalf("%q: method %q, encoding/json reads %s", data, m.Method, env["method"])
			}
			if p := env["params"]; string(p) != "null" && !bytes.Equal(p, m.Params) {
				t.Fatalf("%q: params %s, encoding/json reads %s", data, m.Params, p)
			}
		} else if !bytes.Equal(env["result"], m.Result) && m.Error == nil {
			t.Fatalf("%q: result %s, encoding/json reads %s", data, m.Result, env["result"])
		}
		if m.ID != nil && !bytes.Equal(env["id"], m.ID) {
			t.Fatalf("%q: id %s, encoding/json reads %s", data, m.ID, env["id"])
		}
		if id, has := env["id"]; has && string(id) != "null" && m.ID == nil {
			t.Fatalf("%q: the id %s was lost", data, id)
		}
	})
}
