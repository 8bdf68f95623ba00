package upstream

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// withProgressToken returns params with _meta.progressToken set to token,
// every other byte as it was: the members are spliced, not re-encoded. It
// reports false when params is not a JSON object (nothing to put a token
// in). Empty params become {"_meta":{"progressToken":token}}.
func withProgressToken(params, token json.RawMessage) (json.RawMessage, bool) {
	if len(bytes.TrimSpace(params)) == 0 {
		return append(append([]byte(`{"_meta":{"progressToken":`), token...), "}}"...), true
	}
	return rawjson.Set(params, "_meta", func(meta []byte) []byte {
		if out, ok := rawjson.Set(meta, "progressToken", func([]byte) []byte { return token }); ok {
			return out
		}
		// No _meta yet, or one that is not an object: a new one.
		return append(append([]byte(`{"progressToken":`), token...), '}')
	})
}

// withMeta returns params with each of members set in _meta, every other
// byte as it was, in the order of the members' names. It reports false
// when params is not a JSON object.
func withMeta(params json.RawMessage, members map[string]json.RawMessage) (json.RawMessage, bool) {
	if len(bytes.TrimSpace(params)) == 0 {
		params = json.RawMessage(`{}`)
	}
	names := slices.Sorted(maps.Keys(members))
	return rawjson.Set(params, "_meta", func(meta []byte) []byte {
		out := meta
		for _, name := range names {
			var ok bool
			if out, ok = rawjson.Set(out, name, func([]byte) []byte { return members[name] }); !ok {
				// No _meta yet, or one that is not an object: a new one.
				out, _ = rawjson.Marshal(members)
				return out
			}
		}
		return out
	})
}
