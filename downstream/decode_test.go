package downstream

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
)

func TestDecodeClient(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		code     int    // 0: decodes
		id       string // the id the error answers, "" for none
	}{
		{"plain", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, ""},
		{"byte order mark", "\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, ""},
		{"utf-8", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"é中🚀"}}`, 0, ""},
		{"invalid utf-8 in a request", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + "\xff\xfe" + `"}}}`, jsonrpc.CodeParseError, "7"},
		{"invalid utf-8 in a notification", `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"` + "\xc3" + `"}}`, jsonrpc.CodeParseError, ""},
		{"surrogate half", `{"jsonrpc":"2.0","id":"a","method":"x","params":{"a":"` + "\xed\xa0\x80" + `"}}`, jsonrpc.CodeParseError, `"a"`},
		{"two marks", "\xef\xbb\xbf\xef\xbb\xbf{}", jsonrpc.CodeParseError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, owned := range []bool{false, true} {
				msg, de := decodeClient([]byte(tc.in), owned)
				if tc.code == 0 {
					require.Nil(t, de)
					assert.Equal(t, "ping", msg.Method)
					continue
				}
				require.NotNil(t, de)
				assert.Equal(t, tc.code, de.Code)
				assert.Equal(t, tc.id, string(de.ID))
			}
		})
	}
}

func TestStdioRefusesInvalidUTF8AndIgnoresByteOrderMark(t *testing.T) {
	h := newStdioHandler()
	p := startStdio(t, h, StdioOptions{})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"`+"\xff"+`"}}`)
	m := p.next(t)
	assert.JSONEq(t, `1`, string(m["id"]))
	var e jsonrpc.Error
	require.NoError(t, json.Unmarshal(m["error"], &e))
	assert.Equal(t, jsonrpc.CodeParseError, e.Code)
	assert.Contains(t, e.Message, "UTF-8")

	p.send(t, "\xef\xbb\xbf"+`{"jsonrpc":"2.0","id":2,"method":"echo"}`)
	m = p.next(t)
	assert.JSONEq(t, `2`, string(m["id"]))
	assert.JSONEq(t, `{"method":"echo","protocol":"","sessionless":"false","principal":"local"}`, string(m["result"]))
	assert.EqualValues(t, 1, h.handled.Load(), "only the valid request reached the handler")
}

func TestHTTPRefusesInvalidUTF8AndIgnoresByteOrderMark(t *testing.T) {
	h := newHTTPFake()
	s := serveHTTP(t, h, HTTPOptions{})
	id := s.initialize(t)
	msg := requireRefused(t, s.sessionPost(t, id, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"`+"\xc0\xaf"+`"}}`),
		http.StatusBadRequest, jsonrpc.CodeParseError, "UTF-8")
	assert.JSONEq(t, `5`, string(msg.ID))
	assert.Equal(t, []string{"initialize"}, h.seen())

	resp := s.sessionPost(t, id, "\xef\xbb\xbf"+`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	msg = readMessage(t, resp)
	assert.JSONEq(t, `6`, string(msg.ID))
	assert.Equal(t, []string{"initialize", "tools/list"}, h.seen())
}

var callKeyIDs = []string{`0`, `-0`, `7`, `-7`, `"7"`, `"07"`, `"-0"`, `"+7"`, `"x"`, `"s:x"`, `""`, `"\u0037"`,
	`123456789012345678`, `1234567890123456789`, `-123456789012345678`, `"1234567890123456789"`, `9223372036854775807`}

// TestCallKey checks that ids share a callKey exactly when they share an
// IDKey: the requests in flight are told apart as before.
func TestCallKey(t *testing.T) {
	for _, a := range callKeyIDs {
		for _, b := range callKeyIDs {
			checkCallKey(t, []byte(a), []byte(b))
		}
	}
	assert.Equal(t, callKey{n: 7}, keyOf([]byte(`7`)))
	assert.Equal(t, callKey{n: 7}, keyOf([]byte(`"7"`)))
	assert.Equal(t, callKey{s: "07"}, keyOf([]byte(`"07"`)))
}

func FuzzCallKey(f *testing.F) {
	for _, a := range callKeyIDs {
		f.Add([]byte(a), []byte(`7`))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if !jsonrpc.ValidID(a) || !jsonrpc.ValidID(b) {
			return // the decoder takes no such id
		}
		checkCallKey(t, a, b)
	})
}

func checkCallKey(t *testing.T, a, b []byte) {
	t.Helper()
	ka := keyOf(a)
	if ka.s == "" {
		assert.Equal(t, jsonrpc.IDKey(a), strconv.FormatInt(ka.n, 10), "the integer key of %s", a)
	}
	assert.Equal(t, jsonrpc.IDKey(a) == jsonrpc.IDKey(b), ka == keyOf(b), "%s and %s", a, b)
}
