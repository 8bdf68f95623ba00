package catalog

import (
	"encoding/json"
	"slices"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
)

// mergeExtensions adds the extensions an upstream declares to those of the
// servers before it. An extension any server offers is offered; its settings are the first server's (in config order),
// with the members of later servers' settings objects that the first
// lacks added, every value as its server sent it: fields the aggregator
// does not know pass untouched.
func mergeExtensions(into map[string]json.RawMessage, declared json.RawMessage) map[string]json.RawMessage {
	var ext map[string]json.RawMessage
	if len(declared) == 0 || json.Unmarshal(declared, &ext) != nil {
		return into
	}
	ids := make([]string, 0, len(ext))
	for id := range ext {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		settings := ext[id]
		if string(settings) == "null" || string(settings) == "false" {
			continue
		}
		if into == nil {
			into = map[string]json.RawMessage{}
		}
		have, ok := into[id]
		if !ok {
			into[id] = settings
			continue
		}
		if len(have) == 0 || have[0] != '{' {
			continue
		}
		later := rawjson.NewObject(settings)
		for later.Next() {
			if name := string(later.Name()); !rawjson.Has(have, name) {
				have = rawjson.Add(have, name, later.Value())
			}
		}
		into[id] = have
	}
	return into
}
