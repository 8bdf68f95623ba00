package jsonrpc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeValidity(t *testing.T) {
	tests := []struct {
		name string
		in   string
		code int // 0: valid
		id   string
	}{
		{"request with integer id", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, 0, "7"},
		{"request with string id", `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`, 0, `"a-1"`},
		{"request with negative id", `{"jsonrpc":"2.0","id":-3,"method":"ping"}`, 0, "-3"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, ""},
		{"result", `{"jsonrpc":"2.0","id":1,"result":{}}`, 0, "1"},
		{"error with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, 0, "null"},
		{"null id on a request", `{"jsonrpc":"2.0","id":null,"method":"tools/call"}`, CodeInvalidRequest, ""},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call"}`, CodeInvalidRequest, ""},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"tools/call"}`, CodeInvalidRequest, ""},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"tools/call"}`, CodeInvalidRequest, ""},
		{"float id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call"}`, CodeInvalidRequest, ""},
		{"exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"tools/call"}`, CodeInvalidRequest, ""},
		{"version 1.0", `{"jsonrpc":"1.0","id":1,"method":"tools/call"}`, CodeInvalidRequest, "1"},
		{"no version", `{"id":1,"method":"tools/call"}`, CodeInvalidRequest, "1"},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, CodeInvalidRequest, "1"},
		{"scalar params", `{"jsonrpc":"2.0","id":1,"method":"x","params":3}`, CodeInvalidRequest, "1"},
		{"not JSON", `{"jsonrpc":`, CodeParseError, ""},
		{"array (batch)", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, CodeInvalidRequest, ""},
		{"neither request nor response", `{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest, ""},
		{"member names are exact", `{"JSONRPC":"2.0","id":1,"method":"ping"}`, CodeInvalidRequest, "1"},
		{"escaped member names", `{"jsonrpc":"2\u002e0","\u0069d":1,"method":"ping"}`, 0, "1"},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":7}`, CodeInvalidRequest, "1"},
		{"trailing bytes", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, CodeParseError, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode([]byte(tc.in))
			if tc.code == 0 {
				require.NoError(t, err)
				assert.Equal(t, tc.id, string(m.ID))
				return
			}
			var de *DecodeError
			require.True(t, errors.As(err, &de), "got %v", err)
			assert.Equal(t, tc.code, de.Code)
			assert.Equal(t, tc.id, string(de.ID))
			// The error response is itself a valid message.
			_, err = Decode(de.Response().Encode())
			assert.NoError(t, err)
		})
	}
}

func TestEncodeKeepsRawMembers(t *testing.T) {
	params := `{"b":1,"a":"<&>","n":12345678901234567890}`
	m := &Message{ID: json.RawMessage(`"x"`), Method: "tools/call", Params: json.RawMessage(params)}
	out := m.Encode()
	assert.Equal(t, `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":`+params+`}`, string(out))
	back, err := Decode(out)
	require.NoError(t, err)
	assert.Equal(t, params, string(back.Params))

	e := Failure(json.RawMessage(`3`), &Error{Code: -1, Message: "m\"q", Data: json.RawMessage(`{"k":[1,2]}`)})
	back, err = Decode(e.Encode())
	require.NoError(t, err)
	assert.Equal(t, -1, back.Error.Code)
	assert.Equal(t, "m\"q", back.Error.Message)
	assert.JSONEq(t, `{"k":[1,2]}`, string(back.Error.Data))
}

func TestIDKey(t *testing.T) {
	assert.Equal(t, IDKey(json.RawMessage(`5`)), IDKey(json.RawMessage(`"5"`)))
	assert.NotEqual(t, IDKey(json.RawMessage(`"a"`)), IDKey(json.RawMessage(`5`)))
}

// FuzzDecode: any input either decodes to a message whose encoding decodes
// to the same envelope, or fails with a code a receiver can answer with.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m","data":[1]}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`,
		`{"jsonrpc":"1.0","id":1.5}`, `[]`, `null`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error without a code: %v", err)
			}
			if de.Code != CodeParseError && de.Code != CodeInvalidRequest {
				t.Fatalf("unexpected code %d", de.Code)
			}
			return
		}
		again, err := Decode(m.Encode())
		if err != nil {
			t.Fatalf("re-decoding %q: %v", m.Encode(), err)
		}
		if string(again.ID) != string(m.ID) || again.Method != m.Method || string(again.Params) != string(m.Params) {
			t.Fatalf("round trip changed the message: %q -> %q", data, m.Encode())
		}
	})
}

func TestDecodeDoesNotAliasItsInput(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}`)
	m, err := Decode(line)
	require.NoError(t, err)
	for i := range line {
		line[i] = ' ' // a reader reuses its buffer for the next line
	}
	assert.Equal(t, `"a"`, string(m.ID))
	assert.Equal(t, `{"name":"x"}`, string(m.Params))
}

// TestDecodeOwned: DecodeOwned keeps the message in the caller's bytes;
// Decode never does, so that the caller may reuse them.
func TestDecodeOwned(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"result":{"a":1}}`)
	owned, err := DecodeOwned(line)
	require.NoError(t, err)
	copied, err := Decode(line)
	require.NoError(t, err)
	assert.Equal(t, owned, copied)
	line[len(line)-3] = '2' // {"a":2}
	assert.Equal(t, `{"a":2}`, string(owned.Result), "points into the bytes handed over")
	assert.Equal(t, `{"a":1}`, string(copied.Result), "a copy of its own")
}

// TestAnswerID: the id of a message Decode refuses is read when it comes
// before what cannot be read and no method was seen; anything else has none.
func TestAnswerID(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, tc := range []struct{ name, msg, want string }{
		{"too deep", `{"jsonrpc":"2.0","id":7,"result":` + deep + `}`, `7`},
		{"string id", `{"jsonrpc":"2.0","id":"a","result":{"x":` + deep + `}}`, `"a"`},
		{"truncated", `{"jsonrpc":"2.0","id":7,"result":{"content":[`, `7`},
		{"bad error member", `{"jsonrpc":"2.0","id":7,"error":"boom"}`, `7`},
		{"a request", `{"jsonrpc":"2.0","id":7,"method":"ping","params":` + deep + `}`, ``},
		{"id after the break", `{"jsonrpc":"2.0","result":` + deep + `,"id":7}`, ``},
		{"no id", `{"jsonrpc":"2.0","result":` + deep + `}`, ``},
		{"not an object", `[1,2`, ``},
		{"id not an id", `{"id":{"a":1},"result":` + deep + `}`, ``},
	} {
		assert.Equal(t, tc.want, string(AnswerID([]byte(tc.msg))), tc.name)
	}
	_, err := Decode([]byte(`{"jsonrpc":"2.0","id":7,"result":` + deep + `}`))
	assert.EqualError(t, err, "parse error: the message is nested more than 10000 levels deep")
}

// TestDecodeKnownMethod: a request of a method every call sends is decoded
// with one allocation, the message itself (its name is not copied); any
// other method, or one written with escapes, is read as before.
func TestDecodeKnownMethod(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = DecodeOwned(line) }))
	m, err := DecodeOwned(line)
	require.NoError(t, err)
	assert.Equal(t, "tools/call", m.Method)
	for raw, want := range map[string]string{
		`"tools\/call"`:              "tools/call",
		`"tools/callx"`:              "tools/callx",
		`"notifications/progress"`:   "notifications/progress",
		`"\u0070ing"`:                "ping",
		`"resources/templates/list"`: "resources/templates/list",
	} {
		m, err := DecodeOwned([]byte(`{"jsonrpc":"2.0","method":` + raw + `}`))
		require.NoError(t, err, raw)
		assert.Equal(t, want, m.Method, raw)
	}
}

// DecodeBorrowed reads what Decode reads, borrowing the input, and leaves
// the message as it was when the input is not a valid message.
func TestDecodeBorrowed(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":7,"result":{"a":1}}`)
	var m Message
	require.NoError(t, DecodeBorrowed(&m, line))
	assert.Equal(t, "7", string(m.ID))
	assert.Equal(t, `{"a":1}`, string(m.Result))
	line[len(line)-3] = '2'
	assert.Equal(t, `{"a":2}`, string(m.Result), "the result points into the input")

	err := DecodeBorrowed(&m, []byte(`{"jsonrpc":"2.0","id":8}`))
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, CodeInvalidRequest, de.Code)
	assert.Equal(t, "7", string(m.ID), "a refused message leaves m alone")

	require.NoError(t, DecodeBorrowed(&m, []byte(`{"jsonrpc":"2.0","id":9,"error":{"code":-1,"message":"no","data":{"x":1}}}`)))
	require.NotNil(t, m.Error)
	assert.Nil(t, m.Result)
	assert.Equal(t, `{"x":1}`, string(m.Error.Data))
}
