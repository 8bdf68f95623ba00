package proxy

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// serverInfoKey is the _meta member in which a 2026-07-28 result names the
// server that produced it.
const serverInfoKey = "io.modelcontextprotocol/serverInfo"

// encode is the one result encoder: it gives resp's result, in one pass
// and one copy, what the request's generation requires of it, and nothing
// else of the result changes.
//
// From 2026-07-28 on, every result says its resultType ("complete" unless
// the result already names one), a list or read says how long it may be
// cached (ttlMs 0, cacheScope private: the catalog can change at any time
// and is filtered per client), and a server SHOULD name itself in every
// result's _meta; the aggregator is the server its client talks to, so it
// names itself in place of any upstream. A client of an earlier
// generation met the aggregator at initialize and is told no upstream's
// name either. A result is never written to in place: it may be a cached
// list.
func (p *Proxy) encode(req *downstream.Request, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp == nil || len(resp.Result) == 0 {
		return resp
	}
	if !protocol.Modern(req.Protocol) {
		if rawjson.Mentions(resp.Result, serverInfoKey) && rawjson.Has(rawjson.Member(resp.Result, "_meta"), serverInfoKey) {
			resp.Result = rawjson.Edits(resp.Result, rawjson.Edit{Name: "_meta", Value: func(old []byte) []byte {
				return rawjson.Without(old, serverInfoKey) // nil stays nil: nothing is added
			}})
		}
		return resp
	}
	edits := p.modernEdits[:]
	if !cacheable(req.Msg.Method) {
		edits = edits[:2]
	}
	resp.Result = rawjson.Edits(resp.Result, edits...)
	return resp
}

// cacheable reports whether method's results carry the caching hints of
// 2026-07-28: the lists and resources/read.
func cacheable(method string) bool {
	switch method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover":
		return true
	}
	return false
}

// resultEdits are the edits encode makes to a 2026-07-28 result: resultType
// and the serverInfo _meta of every result, then the caching hints of the
// cacheable ones.
func resultEdits(serverInfo json.RawMessage) [4]rawjson.Edit {
	ifAbsent := func(value string) func([]byte) []byte {
		return func(old []byte) []byte {
			if old != nil {
				return old
			}
			return []byte(value)
		}
	}
	return [4]rawjson.Edit{
		{Name: "resultType", Value: ifAbsent(`"complete"`)},
		{Name: "_meta", Value: func(old []byte) []byte {
			if out, ok := rawjson.Set(old, serverInfoKey, func([]byte) []byte { return serverInfo }); ok {
				return out
			}
			return metaOf(serverInfoKey, serverInfo) // none, null or not an object: nothing of it to keep
		}},
		{Name: "ttlMs", Value: ifAbsent(`0`)},
		{Name: "cacheScope", Value: ifAbsent(`"private"`)},
	}
}

// metaOf renders {key: value}.
func metaOf(key string, value []byte) []byte {
	b := rawjson.AppendString([]byte{'{'}, key)
	b = append(b, ':')
	b = append(b, value...)
	return append(b, '}')
}
