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
// in). Empty params become {"_meta":{"progressToken":token}}. A _meta that
// is not an object is replaced by one; every _meta and every progressToken
// in one, should a name repeat, gets the token.
//
// It reads params once (and each _meta once more), and writes the result
// in one allocation: every call that asks for progress comes through here.
func withProgressToken(params, token json.RawMessage) (json.RawMessage, bool) {
	if len(bytes.TrimSpace(params)) == 0 {
		return append(append([]byte(`{"_meta":{"progressToken":`), token...), "}}"...), true
	}
	// Where the token goes, in the order of params; most params need one
	// splice, which stays on the stack.
	var spliceBuf [4]tokenSplice
	splices := spliceBuf[:0]
	count, metas := 0, 0
	obj := rawjson.NewObject(params)
	for obj.Next() {
		count++
		if string(obj.Name()) != "_meta" {
			continue
		}
		metas++
		start, end := obj.ValueSpan()
		splices = metaSplices(splices, params[start:end], start)
	}
	if obj.Err() != nil {
		return nil, false
	}
	if metas == 0 {
		// No _meta: one, first.
		open := bytes.IndexByte(params, '{') + 1
		s := tokenSplice{start: open, end: open, before: `"_meta":{"progressToken":`, after: "}"}
		if count > 0 {
			s.after = "},"
		}
		splices = append(splices, s)
	}
	size := len(params)
	for _, s := range splices {
		size += len(s.before) + len(token) + len(s.after) - (s.end - s.start)
	}
	out := make([]byte, 0, size)
	last := 0
	for _, s := range splices {
		out = append(out, params[last:s.start]...)
		out = append(out, s.before...)
		out = append(out, token...)
		out = append(out, s.after...)
		last = s.end
	}
	return append(out, params[last:]...), true
}

// tokenSplice is where withProgressToken writes the token: params[start:end]
// is replaced by before, the token, and after.
type tokenSplice struct {
	start, end    int
	before, after string
}

// metaSplices appends the splices that put the token in meta, a _meta's
// value, which starts at offset in params: each progressToken's value
// replaced, or one added first when it has none; a meta that is not an
// object replaced whole.
func metaSplices(splices []tokenSplice, meta []byte, offset int) []tokenSplice {
	if meta[0] != '{' {
		return append(splices, tokenSplice{start: offset, end: offset + len(meta), before: `{"progressToken":`, after: "}"})
	}
	found, members := false, 0
	o := rawjson.NewObject(meta)
	for o.Next() {
		members++
		if string(o.Name()) == "progressToken" {
			found = true
			start, end := o.ValueSpan()
			splices = append(splices, tokenSplice{start: offset + start, end: offset + end})
		}
	}
	if found {
		return splices
	}
	s := tokenSplice{start: offset + 1, end: offset + 1, before: `"progressToken":`}
	if members > 0 {
		s.after = ","
	}
	return append(splices, s)
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
