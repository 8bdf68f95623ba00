package integration

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParamHeaders: a tool of a 2026-07-28 upstream (TypeScript SDK v2
// server, which checks Mcp-Param-* headers against the body) marks a
// parameter with x-mcp-header. Behind a prefix, the aggregator checks a
// client's headers against its body (HTTP 400, -32020 when they disagree
// or one is missing) and generates the upstream's headers afresh, the
// method, name and parameter headers of the upstream's own tool name.
func TestParamHeaders(t *testing.T) {
	t.Parallel()
	a, _ := modernUpstream(t, "    truely-stateless: true\n", "    transform: [{prefix: m_}]\n")
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(region string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"m_in_region","arguments":{"region":` + quoted(region) + `,"query":"q"},` + meta + `}}`
	}

	r := modernRaw(t, a.url, "tools/call", "m_in_region", call("us-west1"), http.Header{"Mcp-Param-Region": {"us-west1"}})
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "q in us-west1", firstText(t, coreMessage(t, r).Result), "the upstream accepted the headers the aggregator made")

	r = modernRaw(t, a.url, "tools/call", "m_in_region", call("Grüße"), http.Header{"Mcp-Param-Region": {"=?base64?R3LDvMOfZQ==?="}})
	assert.Equal(t, http.StatusOK, r.status, "a base64 header is decoded before it is compared: %s", r.body)
	assert.Equal(t, "q in Grüße", firstText(t, coreMessage(t, r).Result))

	for name, h := range map[string]http.Header{
		"mismatch": {"Mcp-Param-Region": {"eu-north1"}},
		"missing":  nil,
	} {
		r := modernRaw(t, a.url, "tools/call", "m_in_region", call("us-west1"), h)
		assert.Equal(t, http.StatusBadRequest, r.status, "%s: %s", name, r.body)
		code, _, message := modernError(t, r)
		assert.Equal(t, -32020, code, "%s: HeaderMismatch", name)
		assert.Contains(t, message, "Mcp-Param-Region", name)
	}
}
