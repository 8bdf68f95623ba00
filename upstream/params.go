package upstream

import (
	"bytes"
	"encoding/json"
	"io"
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
	return setMember(params, "_meta", func(meta []byte) []byte {
		if out, ok := setMember(meta, "progressToken", func([]byte) []byte { return token }); ok {
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
	return setMember(params, "_meta", func(meta []byte) []byte {
		out := meta
		for _, name := range names {
			var ok bool
			if out, ok = setMember(out, name, func([]byte) []byte { return members[name] }); !ok {
				// No _meta yet, or one that is not an object: a new one.
				out, _ = rawjson.Marshal(members)
				return out
			}
		}
		return out
	})
}

// setMember returns the JSON object obj with the value of every member
// named key replaced by value(old), or, when it has none, with the member
// key: value(nil) added first. The rest of obj keeps its bytes. It reports
// false when obj is not one JSON object.
func setMember(obj []byte, key string, value func(old []byte) []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	open := int(dec.InputOffset()) // just after '{'
	empty := !dec.More()
	type span struct{ start, end int }
	var found []span
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		if name == key {
			found = append(found, span{end - len(v), end})
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // something after the object
	}
	if len(found) == 0 {
		member := append(rawjson.AppendString(nil, key), ':')
		member = append(member, value(nil)...)
		if !empty {
			member = append(member, ',')
		}
		out := make([]byte, 0, len(obj)+len(member))
		out = append(out, obj[:open]...)
		out = append(out, member...)
		return append(out, obj[open:]...), true
	}
	out := make([]byte, 0, len(obj)+32)
	last := 0
	for _, s := range found {
		out = append(out, obj[last:s.start]...)
		out = append(out, value(obj[s.start:s.end])...)
		last = s.end
	}
	return append(out, obj[last:]...), true
}
