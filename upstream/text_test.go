package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestValidTextReadsAsEncodingJSONDoes: what validText makes of a string
// that is not UTF-8, or holds half a surrogate pair, is what encoding/json
// decodes it to, written as UTF-8 or \ufffd; valid text, whole pairs and
// escaped backslashes stay as they are, without a copy.
func TestValidTextReadsAsEncodingJSONDoes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"caf\xe9", "caf\uFFFD"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"\xe2\x82", "\uFFFD\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{`cut \ud83d`, `cut \ufffd`},
		{`\uDE00 low first`, `\ufffd low first`},
		{`\ud83d\ud83d\ude00`, `\ufffd\ud83d\ude00`},
		{`\ud83d\n`, `\ufffd\n`},
		{"caf\xe9 \\ud83d", "caf\uFFFD \\ufffd"},
	} {
		raw := []byte(`"` + tc.in + `"`)
		got := validText(raw)
		assert.Equal(t, `"`+tc.want+`"`, string(got), "%q", tc.in)
		var want, read string
		assert.NoError(t, json.Unmarshal(raw, &want))
		assert.NoError(t, json.Unmarshal(got, &read))
		assert.Equal(t, want, read, "%q reads as encoding/json reads it", tc.in)
	}
	for _, in := range []string{`{"text":"café \ud83d\ude00 \uD83D\uDE00"}`, `{"path":"C:\\udata\\d800"}`, `{"t":"\\\ud83d\ude00"}`} {
		valid := []byte(in)
		assert.Same(t, &valid[0], &validText(valid)[0], "%s", in)
	}
}

func BenchmarkValidText(b *testing.B) {
	for name, line := range map[string][]byte{
		"echo":    []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello from the benchmark"}],"isError":false}}`),
		"escaped": []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat(`caf\u00e9 and more text; `, 100) + `"}]}}`),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = validText(line)
			}
		})
	}
}
