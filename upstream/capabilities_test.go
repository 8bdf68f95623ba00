package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseCapabilities(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Capabilities
	}{
		{"none", `{}`, Capabilities{}},
		{"tools only", `{"tools":{}}`, Capabilities{Tools: true}},
		{"everything", `{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"completions":{},"logging":{},"tasks":{"list":{},"cancel":{}}}`,
			Capabilities{Tools: true, ToolsListChanged: true, Resources: true, ResourcesSubscribe: true, ResourcesListChanged: true,
				Prompts: true, PromptsListChanged: true, Completions: true, Logging: true, Tasks: true}},
		{"sub-capabilities only when true", `{"tools":{"listChanged":false},"resources":{"subscribe":"yes","listChanged":1},"prompts":{"listChanged":null}}`,
			Capabilities{Tools: true, Resources: true, Prompts: true}},
		{"null and false declare nothing", `{"tools":null,"resources":false,"logging":null}`, Capabilities{}},
		{"a malformed member declares what it can", `{"tools":true,"prompts":[]}`, Capabilities{Tools: true, Prompts: true}},
		{"unknown members are kept in Raw only", `{"x-future":{"big":12345678901234567890},"experimental":{"a":{}}}`, Capabilities{}},
		{"not an object", `[1]`, Capabilities{}},
		{"absent", ``, Capabilities{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseCapabilities(json.RawMessage(tc.raw))
			assert.Equal(t, tc.raw, string(got.Raw), "Raw is the object as sent")
			got.Raw = nil
			assert.Equal(t, tc.want, got)
		})
	}
}

// The capabilities the aggregator declares are what it can relay: every
// request an upstream may send a client.
func TestClientCapabilities(t *testing.T) {
	assert.JSONEq(t, `{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},
		"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`, string(clientCapabilities))
}

// An upstream's extensions are kept as sent; one that is not an object
// declares none.
func TestParseExtensions(t *testing.T) {
	got := parseCapabilities(json.RawMessage(`{"tools":{},"extensions":{"io.modelcontextprotocol/ui":{},"com.example/x":{"v":[1,2]}}}`))
	assert.JSONEq(t, `{"io.modelcontextprotocol/ui":{},"com.example/x":{"v":[1,2]}}`, string(got.Extensions))
	for _, raw := range []string{`{"extensions":null}`, `{"extensions":[1]}`, `{"extensions":true}`, `{}`} {
		assert.Nil(t, parseCapabilities(json.RawMessage(raw)).Extensions, raw)
	}
}
