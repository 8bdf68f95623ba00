package proxy

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// keptBack reports whether a key of a request's _meta stays with the
// aggregator rather than going upstream: the aggregator's lease key (its
// own routing, no business of the upstream's) and the protocol's
// io.modelcontextprotocol/ keys (they describe the client's request to the
// aggregator; the upstream's protocol was negotiated apart). The progress
// token goes on, for the upstream connection to replace with its own.
// It compares without converting key, so that a []byte key costs nothing.
func keptBack[K string | []byte](key K) bool {
	const protocolKeys = "io.modelcontextprotocol/"
	return string(key) == LeaseMetaKey ||
		len(key) >= len(protocolKeys) && string(key[:len(protocolKeys)]) == protocolKeys
}

// withheldMeta reports whether a key of a tools/call's _meta stays with
// the aggregator: the kept-back keys, and the progress token (each call
// gets an upstream token of its own, which the upstream connection adds).
func withheldMeta(key []byte) bool {
	return string(key) == "progressToken" || keptBack(key)
}

// upstreamParams is params as they go upstream: the members of _meta that
// are kept back left out (and _meta with them when nothing else is in it),
// every other byte as it was. params without such keys are returned as they
// are; so are params that are not one JSON object.
func upstreamParams(params json.RawMessage, meta map[string]json.RawMessage) json.RawMessage {
	drop := false
	for k := range meta {
		if keptBack(k) {
			drop = true
			break
		}
	}
	if !drop {
		return params
	}
	return editMeta(params, func(m []byte) []byte { return rawjson.WithoutFunc(m, keptBack[[]byte]) })
}

// editMeta returns params with its _meta replaced by edit(_meta), or
// without _meta when edit leaves an object that had members empty. params
// without _meta, or that are not one JSON object, are returned as they are.
func editMeta(params json.RawMessage, edit func(meta []byte) []byte) json.RawMessage {
	meta := rawjson.Member(params, "_meta")
	if meta == nil {
		return params
	}
	edited := edit(meta)
	if rawjson.Empty(edited) && !rawjson.Empty(meta) {
		return rawjson.Without(params, "_meta")
	}
	out, _ := rawjson.Replace(params, "_meta", func([]byte) ([]byte, bool) { return edited, true })
	return out
}
