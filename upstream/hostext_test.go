package upstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A host's extensions reach an instance leased to it: those the aggregator
// carries, as the host set them; the rest, and those declared null or
// false, are left out. Without a host the aggregator's own declaration
// stands.
func TestHostExtensions(t *testing.T) {
	caps, ext := capabilitiesFor(context.Background())
	assert.JSONEq(t, string(clientCapabilities), string(caps))
	assert.JSONEq(t, `{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}`, string(ext))

	host := json.RawMessage(`{"sampling":{},"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"],"x":1},
		"io.modelcontextprotocol/tasks":{},"com.example/other":{"a":true}}}`)
	caps, ext = capabilitiesFor(ForHost(context.Background(), host))
	assert.JSONEq(t, `{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"],"x":1}}`, string(ext))
	assert.JSONEq(t, `{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},
		"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"],"x":1}}}`, string(caps),
		"the other capabilities stay the aggregator's")

	for _, none := range []string{`{}`, `{"extensions":{"io.modelcontextprotocol/ui":null}}`, `{"extensions":{"io.modelcontextprotocol/ui":false}}`,
		`{"extensions":[1]}`, `not json`, ``} {
		caps, ext = capabilitiesFor(ForHost(context.Background(), json.RawMessage(none)))
		assert.JSONEq(t, `{}`, string(ext), none)
		assert.JSONEq(t, `{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true}}`, string(caps), none)
	}
}

// A spare, started for no host in particular, suits a host that declares
// what it declared of the extensions the upstream declares too; the others
// are not in use, and make no difference.
func TestSuits(t *testing.T) {
	appsHost := ForHost(context.Background(), json.RawMessage(`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`))
	plainHost := ForHost(context.Background(), json.RawMessage(`{}`))
	otherHost := ForHost(context.Background(), json.RawMessage(`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":[]}}}`))

	apps := &Instance{declaredExt: defaultExtensions, caps: Capabilities{Extensions: json.RawMessage(`{"io.modelcontextprotocol/ui":{}}`)}}
	assert.True(t, Suits(context.Background(), apps), "no host named: any instance")
	assert.True(t, Suits(appsHost, apps))
	assert.False(t, Suits(plainHost, apps), "the server uses MCP Apps, the host has none")
	assert.False(t, Suits(otherHost, apps), "other settings")

	plain := &Instance{declaredExt: defaultExtensions, caps: Capabilities{Extensions: json.RawMessage(`{"com.example/x":{}}`)}}
	for _, host := range []context.Context{appsHost, plainHost, otherHost} {
		assert.True(t, Suits(host, plain), "the server does not use MCP Apps")
	}
	assert.True(t, Suits(plainHost, &Instance{}))
	assert.True(t, Suits(plainHost, &Instance{caps: Capabilities{Extensions: json.RawMessage(`{"io.modelcontextprotocol/ui":{}}`)}}),
		"declared none, as the host")
}
