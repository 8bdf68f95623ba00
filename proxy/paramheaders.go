package proxy

import (
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// Parameter headers (2026-07-28 streamable HTTP): a tool's input schema
// may mark parameters with x-mcp-header, and a client then mirrors their
// values into Mcp-Param-<name> headers. The aggregator processes the body,
// so it checks that those headers agree with it, as a server must: a
// request whose headers and body disagree is refused with HeaderMismatch
// (-32020, HTTP 400), never forwarded. The upstream gets headers generated
// afresh from its own definition of the tool (upstream/paramheaders.go).

// codeHeaderMismatch is 2026-07-28's HeaderMismatch error.
const codeHeaderMismatch = mcp.HEADER_MISMATCH

// paramHeaderMismatch checks the Mcp-Param-* headers of the tools/call
// req against entry's schema; nil when they agree, or when req came with
// no such headers to check (stdio, a session, a tool that marks none, a
// tool mcp_call_tool names, whose arguments are not in the headers).
func paramHeaderMismatch(req *downstream.Request, entry *catalog.Entry) *jsonrpc.Error {
	if req == nil || req.ParamHeader == nil || req.Msg == nil || req.Msg.Method != "tools/call" || !entry.ParamHeaders {
		return nil
	}
	if name, _ := rawjson.String(rawjson.Member(req.Msg.Params, "name")); name != entry.Exported {
		return nil
	}
	tool := mcp.Tool{RawInputSchema: rawjson.Member(entry.Raw, "inputSchema")}
	if err := mcp.ValidateParamHeadersLookup(req.ParamHeader, &tool, req.Msg.Params); err != nil {
		return errorObject(codeHeaderMismatch, "tool %q: %v; send each Mcp-Param-* header its schema's x-mcp-header asks for, with the argument's value", entry.Exported, err)
	}
	return nil
}
