package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// ownServer is the aggregator's own MCP server, run in process: it serves
// the aggregator's own tools (mcp_status, mcp_release, and in search mode
// mcp_search_tools and mcp_call_tool) behind the interface the forwarder
// sends every request to (target), and answers tools/call with a raw
// result, as an upstream would. The forwarder makes one for each call, for
// its caller: the state the call was resolved under, the caller's lease
// key and client (whose profile narrows what it sees). It holds nothing of
// an upstream's: no lease, no slot of a limit, no time limit.
type ownServer struct {
	p      *Proxy
	st     *state
	key    session.Key
	client string
}

var _ target = (*ownServer)(nil)

// Do answers a tools/call of one of the aggregator's own tools; any other
// request is a method it does not serve.
func (o *ownServer) Do(_ context.Context, r upstream.Request) (json.RawMessage, error) {
	if r.Method != "tools/call" {
		return nil, &upstream.RPCError{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the aggregator's own server serves tools/call alone, not %s", r.Method)}
	}
	params, ok := parseCallParams(r.Params, nil)
	if !ok {
		return nil, &upstream.RPCError{Code: codeInvalidParams, Message: "tools/call needs params.name (a string) and optional params.arguments (an object)"}
	}
	switch params.Name {
	case "mcp_status":
		return o.status(), nil
	case "mcp_release":
		return o.release(params.Arguments), nil
	case searchToolName:
		return o.searchTools(params.Arguments), nil
	case callToolName:
		return o.callTool(params.Arguments), nil
	}
	return nil, &upstream.RPCError{Code: codeInvalidParams, Message: fmt.Sprintf("unknown tool %q: the aggregator's own server has no such tool; call tools/list for the current names", params.Name)}
}
