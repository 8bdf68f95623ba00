package proxy

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// The discovery pair: in search mode tools/list shows these two (with the
// admin tools and the discovery.always matches) instead of the catalog.
const (
	searchToolName = "mcp_search_tools"
	callToolName   = "mcp_call_tool"
	maxSearchLimit = 50
)

var discoveryTools = []struct {
	name string
	raw  json.RawMessage
}{
	{searchToolName, json.RawMessage(`{"name":"mcp_search_tools","title":"Search the tools of every MCP server",` +
		`"description":"Find a tool among every tool of the MCP servers behind this aggregator; most are not listed directly, to save context. Describe what you want to do in a few words (\"read a file\", \"create a GitHub issue\") or give a tool name. You get the best matches first, each with its input schema. Then call the one you chose with mcp_call_tool, passing its exact name and arguments that match its inputSchema. Search again with other words if nothing fits.",` +
		`"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, or a tool name."},"limit":{"type":"integer","minimum":1,"maximum":50,"default":5,"description":"How many tools to return (default 5, at most 50)."}},"required":["query"],"additionalProperties":false},` +
		`"outputSchema":{"type":"object","properties":{"tools":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"description":{"type":"string"},"inputSchema":{"type":"object"},"server":{"type":"string"}},"required":["name","description","inputSchema","server"]}}},"required":["tools"]},` +
		`"annotations":{"readOnlyHint":true,"openWorldHint":false}}`)},
	{callToolName, json.RawMessage(`{"name":"mcp_call_tool","title":"Call a tool found with mcp_search_tools",` +
		`"description":"Call a tool that mcp_search_tools found: give its exact name and its arguments as its inputSchema describes. The result is that tool's own result.",` +
		`"inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The exact tool name, as mcp_search_tools returned it."},"arguments":{"type":"object","description":"The tool's arguments, matching its inputSchema."}},"required":["name"],"additionalProperties":false}}`)},
}

// isDiscoveryTool reports whether an admin tool name is one of the pair.
func isDiscoveryTool(name string) bool { return name == searchToolName || name == callToolName }

// discoveryEntries are the pair's catalog entries under d: none unless in
// search mode. A name another server already exports stays that server's,
// as with every other name.
func discoveryEntries(d config.Discovery, cat *catalog.Catalog) []*catalog.Entry {
	if d.Mode != config.DiscoverySearch {
		return nil
	}
	var out []*catalog.Entry
	for _, t := range discoveryTools {
		if owner, taken := cat.Owner(t.name); taken && owner != adminServer {
			continue
		}
		out = append(out, &catalog.Entry{Exported: t.name, Server: adminServer, Original: t.name, Raw: t.raw})
	}
	return out
}

// listedTools is the tools array tools/list answers under st.
func (st *state) listedTools() json.RawMessage {
	if st.search != nil {
		return st.search.Listed
	}
	return st.catalog.ToolsJSON()
}

// toolsResult is tools/list's result for a client without a profile,
// rendered with the catalog: the list is not copied per request.
func (st *state) toolsResult() json.RawMessage {
	if st.search != nil {
		return st.search.Result
	}
	return st.catalog.ToolsResult()
}
