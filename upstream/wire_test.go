package upstream

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIDKey(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{`1`, `"1"`, true},
		{`42`, `42`, true},
		{`"abc"`, `"abc"`, true},
		{`"abc"`, `abc`, false},
		{`1`, `2`, false},
		{`"1"`, `"01"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			assert.Equal(t, tc.same, idKey(json.RawMessage(tc.a)) == idKey(json.RawMessage(tc.b)))
		})
	}
}

func TestRetoken(t *testing.T) {
	tests := []struct {
		name   string
		params string
		token  string
		want   string
	}{
		{"string token", `{"progressToken":"agg-1","progress":1,"total":3,"message":"m"}`, `"abc"`, `{"progressToken":"abc","progress":1,"total":3,"message":"m"}`},
		{"number token", `{"progressToken":"agg-7","progress":0.5}`, `12345678901234567890`, `{"progressToken":12345678901234567890,"progress":0.5}`},
		{"extra members kept", `{"progressToken":"agg-1","progress":2,"x-extra":{"big":9007199254740993}}`, `"t"`, `{"progressToken":"t","progress":2,"x-extra":{"big":9007199254740993}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := retoken(json.RawMessage(tc.params), json.RawMessage(tc.token))
			assert.Equal(t, decodeNumbers(t, []byte(tc.want)), decodeNumbers(t, got))
		})
	}
	t.Run("not an object is passed through", func(t *testing.T) {
		assert.Equal(t, `[1]`, string(retoken(json.RawMessage(`[1]`), json.RawMessage(`"t"`))))
	})
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 1000) // far beyond the 16-byte buffer below
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"short lines", "a\nbb\n", []string{"a", "bb"}},
		{"CRLF", "a\r\nb\r\n", []string{"a", "b"}},
		{"longer than the buffer", long + "\n" + long + "y\n", []string{long, long + "y"}},
		{"last line without newline", "a\n" + long, []string{"a", long}},
		{"empty lines", "\n\na\n", []string{"", "", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.input), 16)
			var got []string
			for {
				line, err := readLine(r)
				if err != nil {
					require.ErrorIs(t, err, io.EOF)
					if len(line) > 0 {
						got = append(got, string(line))
					}
					break
				}
				got = append(got, string(line))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("MCPAGG_TEST_HOST_ONLY", "host")
	t.Setenv("MCPAGG_TEST_OVERRIDDEN", "host")
	env := environ(map[string]string{"MCPAGG_TEST_OVERRIDDEN": "server", "MCPAGG_TEST_NEW": "a=b"})
	count := map[string]int{}
	values := map[string]string{}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		count[name]++
		values[name] = value
	}
	assert.Equal(t, "host", values["MCPAGG_TEST_HOST_ONLY"])
	assert.Equal(t, "server", values["MCPAGG_TEST_OVERRIDDEN"])
	assert.Equal(t, 1, count["MCPAGG_TEST_OVERRIDDEN"], "an overridden variable appears once")
	assert.Equal(t, "a=b", values["MCPAGG_TEST_NEW"])
	assert.Contains(t, environ(nil), "MCPAGG_TEST_HOST_ONLY=host")
}

func TestRPCErrorText(t *testing.T) {
	err := &RPCError{Code: -32042, Message: "nope", Data: json.RawMessage(`{"a":1}`)}
	assert.Equal(t, "upstream error -32042: nope", err.Error())
}
