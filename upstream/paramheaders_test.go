package upstream

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A tools/call to a tool that marks a parameter gets its header, from the
// upstream's own schema; other tools and calls get none.
func TestAddParamHeaders(t *testing.T) {
	schemas := paramSchemas([]Tool{
		{Name: "sql", Raw: json.RawMessage(`{"name":"sql","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}}`)},
		{Name: "plain", Raw: json.RawMessage(`{"name":"plain","inputSchema":{"type":"object"}}`)},
	})
	if assert.NotNil(t, schemas) {
		assert.Len(t, *schemas, 1, "only tools that mark a parameter are kept")
	}
	h := http.Header{}
	addParamHeaders(h, schemas, json.RawMessage(`{"name":"sql","arguments":{"region":" padded ","n":42}}`))
	assert.Equal(t, "=?base64?IHBhZGRlZCA=?=", h.Get("Mcp-Param-Region"))
	assert.Equal(t, "42", h.Get("Mcp-Param-N"))

	h = http.Header{}
	addParamHeaders(h, schemas, json.RawMessage(`{"name":"plain","arguments":{"region":"x"}}`))
	addParamHeaders(h, nil, json.RawMessage(`{"name":"sql","arguments":{"region":"x"}}`))
	assert.Empty(t, h)
	assert.Nil(t, paramSchemas([]Tool{{Name: "plain", Raw: json.RawMessage(`{"name":"plain"}`)}}))
}
