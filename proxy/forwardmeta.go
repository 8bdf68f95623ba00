package proxy

import (
	"encoding/json"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// keptBack reports whether a key of a request's _meta stays with the
// aggregator rather than going upstream: the aggregator's lease key (its
// own routing, no business of the upstream's) and the protocol's
// io.modelcontextprotocol/ keys (they describe the client's request to the
// aggregator; the upstream's protocol was negotiated apart). The progress
// token goes on, for the upstream connection to replace with its own.
func keptBack(key string) bool {
	return key == LeaseMetaKey || strings.HasPrefix(key, "io.modelcontextprotocol/")
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
	out := make([]byte, 0, len(params))
	out = append(out, '{')
	first := true
	add := func(name, value []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = rawjson.AppendString(out, string(name))
		out = append(out, ':')
		out = append(out, value...)
	}
	o := rawjson.NewObject(params)
	for o.Next() {
		if string(o.Name()) != "_meta" {
			add(o.Name(), o.Value())
			continue
		}
		kept := []byte{'{'}
		any := false
		m := rawjson.NewObject(o.Value())
		for m.Next() {
			if keptBack(string(m.Name())) {
				continue
			}
			if any {
				kept = append(kept, ',')
			}
			any = true
			kept = rawjson.AppendString(kept, string(m.Name()))
			kept = append(kept, ':')
			kept = append(kept, m.Value()...)
		}
		if m.Err() != nil {
			return params
		}
		if any {
			add(o.Name(), append(kept, '}'))
		}
	}
	if o.Err() != nil {
		return params
	}
	return append(out, '}')
}
