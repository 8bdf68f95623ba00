package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWithResultMeta(t *testing.T) {
	const info = `{"name":"agg","version":"1"}`
	cases := []struct {
		name, in, set, want string
	}{
		{"no _meta", `{"a":1}`, info, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"agg","version":"1"}},"a":1}`},
		{"empty result", `{}`, info, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"agg","version":"1"}}}`},
		{"other members kept byte for byte", `{"_meta":{"big":18446744073709551615, "x":[1, 2]},"a":1}`, info,
			`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"agg","version":"1"},"big":18446744073709551615, "x":[1, 2]},"a":1}`},
		{"an upstream's name replaced", `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"9"},"k":1}}`, info,
			`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"agg","version":"1"},"k":1}}`},
		{"repeated, replaced once", `{"_meta":{"io.modelcontextprotocol/serverInfo":1,"io.modelcontextprotocol/serverInfo":2}}`, info,
			`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"agg","version":"1"}}}`},
		{"null _meta", `{"_meta":null,"a":1}`, info, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"agg","version":"1"}},"a":1}`},
		{"removed", `{"_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"up"}},"a":1}`, "", `{"_meta":{"k":1},"a":1}`},
		{"nothing to remove", `{"_meta":{"k": 1},"a":1}`, "", `{"_meta":{"k": 1},"a":1}`},
		{"nothing to remove, no _meta", `{"a":1}`, "", `{"a":1}`},
		{"not an object", `[1]`, info, `[1]`},
		{"invalid", `{"a":`, info, `{"a":`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(c.in)
			var value []byte
			if c.set != "" {
				value = []byte(c.set)
			}
			got := withResultMeta(in, serverInfoKey, value)
			assert.Equal(t, c.want, string(got))
			assert.Equal(t, c.in, string(in), "the input is not written to")
		})
	}
}
