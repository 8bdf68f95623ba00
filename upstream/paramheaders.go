package upstream

import (
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Parameter headers: a 2026-07-28 streamable HTTP server may mark
// parameters of a tool's input schema with x-mcp-header, and then expects
// each marked argument of a tools/call mirrored into an Mcp-Param-<name>
// header. The aggregator generates them from the upstream's own definition
// of the tool, as last listed, and the arguments it sends: a client's
// headers never pass through (the client named the tool by its exported
// name, and its headers were checked against its body on the way in).

// paramSchemas returns the input schemas of the tools that mark any
// parameter for a header, by name; nil when none does.
func paramSchemas(tools []Tool) *map[string]json.RawMessage {
	var m map[string]json.RawMessage
	for _, t := range tools {
		if !rawjson.Mentions(t.Raw, "x-mcp-header") {
			continue
		}
		schema := rawjson.Member(t.Raw, "inputSchema")
		if len(schema) == 0 {
			continue
		}
		if m == nil {
			m = map[string]json.RawMessage{}
		}
		m[t.Name] = schema
	}
	if m == nil {
		return nil
	}
	return &m
}

// addParamHeaders sets on h the Mcp-Param-* headers of the tools/call whose
// params are given, per the schema of the tool it names.
func addParamHeaders(h http.Header, schemas *map[string]json.RawMessage, params json.RawMessage) {
	if schemas == nil || h == nil {
		return
	}
	name, ok := rawjson.String(rawjson.Member(params, "name"))
	if !ok {
		return
	}
	schema, ok := (*schemas)[name]
	if !ok {
		return
	}
	for k, v := range mcp.GenerateParamHeaders(&mcp.Tool{RawInputSchema: schema}, params) {
		h.Set(k, v)
	}
}
