package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metaRecorder is an mcp-go streamable-HTTP server with one prompt and one
// resource that records the _meta of every request it is sent, by method.
type metaRecorder struct {
	t      *testing.T
	url    string
	params func(method string) []json.RawMessage
}

// seen is the _meta of each request of method so far, nil where it had none.
func (r *metaRecorder) seen(method string) []json.RawMessage {
	var metas []json.RawMessage
	for _, params := range r.params(method) {
		var p struct {
			Meta json.RawMessage `json:"_meta"`
		}
		if len(params) > 0 {
			require.NoError(r.t, json.Unmarshal(params, &p), "%s", params)
		}
		metas = append(metas, p.Meta)
	}
	return metas
}

func startMetaRecorder(t *testing.T) *metaRecorder {
	t.Helper()
	up := server.NewMCPServer("meta", "1.0.0", server.WithPromptCapabilities(false), server.WithResourceCapabilities(false, false))
	up.AddPrompt(mcp.NewPrompt("greet", mcp.WithPromptDescription("Greets.")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("greeting", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("hello"))}), nil
		})
	up.AddResource(mcp.NewResource("demo://meta", "meta", mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "demo://meta", MIMEType: "text/plain", Text: "meta"}}, nil
		})
	url, params := startRecordingServer(t, up)
	return &metaRecorder{t: t, url: url, params: params}
}

// TestForwardedMetaKeepsTheAggregatorsKeys: a client's _meta on a request the
// aggregator forwards (prompts/get, resources/read) reaches the upstream with
// the client's own keys intact, but without the aggregator's lease key and
// the protocol's io.modelcontextprotocol/ keys, which are the aggregator's
// business, as on tools/call; the progress token goes up as the aggregator's.
func TestForwardedMetaKeepsTheAggregatorsKeys(t *testing.T) {
	t.Parallel()
	rec := startMetaRecorder(t)
	a := serveConfig(t, httpTransport, fmt.Sprintf("version: 1\nservers:\n  meta:\n    transport: streamable_http\n    url: %s\n", quoted(rec.url)))
	a.waitLoaded()
	c := a.connect()
	meta := map[string]any{
		"mcp-aggregator/lease":             "mine",
		"io.modelcontextprotocol/whatever": map[string]any{"x": 1},
		"example.com/trace":                map[string]any{"id": "t-1"},
		"progressToken":                    "p-1",
	}
	res := c.mustRequest("prompts/get", map[string]any{"name": "greet", "_meta": meta})
	require.Empty(t, string(res.Error))
	res = c.mustRequest("resources/read", map[string]any{"uri": "demo://meta", "_meta": map[string]any{"mcp-aggregator/lease": "mine"}})
	require.Empty(t, string(res.Error))

	prompts := rec.seen("prompts/get")
	require.Len(t, prompts, 1)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(prompts[0], &got))
	assert.JSONEq(t, `{"id":"t-1"}`, string(got["example.com/trace"]), "the client's own key went up as it was")
	assert.Contains(t, got, "progressToken", "the progress token went up")
	assert.NotEqual(t, `"p-1"`, string(got["progressToken"]), "the progress token is the aggregator's own")
	assert.NotContains(t, got, "mcp-aggregator/lease")
	assert.NotContains(t, got, "io.modelcontextprotocol/whatever")

	reads := rec.seen("resources/read")
	require.Len(t, reads, 1)
	assert.Empty(t, reads[0], "a _meta of nothing but the lease key is left out whole: %s", reads[0])
}
