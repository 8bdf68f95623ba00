package downstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMetaVersion(t *testing.T) {
	tests := []struct{ name, params, want string }{
		{"none", `{"name":"echo","arguments":{"text":"_meta"}}`, ""},
		{"no params", ``, ""},
		{"sessionless request", `{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, "2026-07-28"},
		{"escaped name", `{"\u005fmeta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, "2026-07-28"},
		{"_meta inside arguments does not count", `{"arguments":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, ""},
		{"not a string", `{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}`, ""},
		{"_meta not an object", `{"_meta":"2026-07-28"}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, metaVersion(json.RawMessage(tc.params)))
		})
	}
}
