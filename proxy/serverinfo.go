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

// identified gives resp's result the server identity its client is owed.
// From 2026-07-28 on a server SHOULD name itself in every result's _meta,
// and the aggregator is the server its client talks to: every result names
// the aggregator, in place of any name an upstream gave there. A client of
// an earlier generation met the aggregator at initialize and is told no
// upstream's name either. Every other byte of the result stays.
func (p *Proxy) identified(req *downstream.Request, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp == nil || len(resp.Result) == 0 {
		return resp
	}
	if protocol.Modern(req.Protocol) {
		resp.Result = withResultMeta(resp.Result, serverInfoKey, p.serverInfoJSON)
	} else if rawjson.Mentions(resp.Result, serverInfoKey) {
		resp.Result = withResultMeta(resp.Result, serverInfoKey, nil)
	}
	return resp
}

// withResultMeta returns result with its _meta member key set to value, or
// removed when value is nil. The result's other bytes, and those of its
// other _meta members, are kept; result itself is never written to (it may
// be a cached list). A result that is not a JSON object is returned as is.
func withResultMeta(result json.RawMessage, key string, value []byte) json.RawMessage {
	start, end, found := -1, -1, false
	obj := rawjson.NewObject(result)
	for obj.Next() {
		if string(obj.Name()) == "_meta" {
			start, end = obj.ValueSpan() // the last, as encoding/json decodes it
			found = true
		}
	}
	if obj.Err() != nil {
		return result
	}
	if !found {
		if value == nil {
			return result
		}
		return rawjson.Add(result, "_meta", metaOf(key, value))
	}
	meta := result[start:end]
	var updated []byte
	switch {
	case len(meta) == 0 || meta[0] != '{':
		// null or not an object: nothing of it to keep.
		if value == nil {
			return result
		}
		updated = metaOf(key, value)
	case rawjson.Mentions(meta, key) && rawjson.Member(meta, key) != nil:
		updated = rawjson.Without(meta, key)
		if value != nil {
			updated = rawjson.Add(updated, key, value)
		}
	default:
		if value == nil {
			return result
		}
		updated = rawjson.Add(meta, key, value)
	}
	out := make([]byte, 0, len(result)-len(meta)+len(updated))
	out = append(out, result[:start]...)
	out = append(out, updated...)
	return append(out, result[end:]...)
}

// metaOf renders {key: value}.
func metaOf(key string, value []byte) []byte {
	b := rawjson.AppendString([]byte{'{'}, key)
	b = append(b, ':')
	b = append(b, value...)
	return append(b, '}')
}
