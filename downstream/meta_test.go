package downstream

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
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

// decodedMeta reads what readMeta reads by decoding params with
// encoding/json: the version, the capabilities (nil when absent or null),
// and whether they are an object, as checkModernRequest requires.
func decodedMeta(params json.RawMessage) (version string, caps json.RawMessage, capsObject bool) {
	meta := members(members(params)["_meta"])
	if s, ok := stringMember(meta, protocol.MetaProtocolVersion); ok {
		version = s
	}
	raw, ok := meta[protocol.MetaClientCapabilities]
	return version, present(raw), ok && members(raw) != nil
}

var metaCases = []string{
	``,
	`{}`,
	`[]`,
	`{"name":"echo","arguments":{"text":"_meta"}}`,
	`{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`,
	`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":7}}`,
	`{"\u005fmeta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","io.modelcontextprotocol\/clientCapabilities":{"sampling":{}}}}`,
	`{"_meta":{"io.modelcontextprotocol/clientCapabilities":null}}`,
	`{"_meta":{"io.modelcontextprotocol/clientCapabilities":[]}}`,
	`{"_meta":{"io.modelcontextprotocol/clientCapabilities":"{}"}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}},"_meta":{"progressToken":1}}`,
	`{"_meta":"2026-07-28"}`,
	`{"_meta":null}`,
	`{"arguments":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-\u0030\u0037-28"}}`,
}

func TestReadMetaAsDecoded(t *testing.T) {
	for _, params := range metaCases {
		checkReadMeta(t, json.RawMessage(params))
	}
}

// FuzzReadMeta checks that the one scan of readMeta reads what decoding
// the params with encoding/json reads, for any valid params.
func FuzzReadMeta(f *testing.F) {
	for _, params := range metaCases {
		f.Add([]byte(params))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) || !utf8.Valid(params) {
			return // the decoder takes no such message
		}
		checkReadMeta(t, params)
	})
}

func checkReadMeta(t *testing.T, params json.RawMessage) {
	t.Helper()
	version, caps, object := decodedMeta(params)
	m := readMeta(params)
	assert.Equal(t, version, m.version, "version of %s", params)
	assert.Equal(t, version, metaVersion(params), "metaVersion of %s", params)
	assert.Equal(t, string(caps), string(m.capabilities()), "capabilities of %s", params)
	msg := &jsonrpc.Message{Method: "tools/call", Params: params}
	assert.Equal(t, object, checkModernRequest(msg, m) == nil, "the capabilities check of %s", params)
}

func BenchmarkReadMeta(b *testing.B) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"progressToken":7,` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`)
	msg := &jsonrpc.Message{Method: "tools/call", Params: params}
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := readMeta(params)
			if checkModernRequest(msg, m) != nil || m.capabilities() == nil {
				b.Fatal("not read")
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			version, caps, object := decodedMeta(params)
			if version == "" || caps == nil || !object {
				b.Fatal("not read")
			}
		}
	})
}
