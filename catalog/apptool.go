package catalog

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// AppTool returns a tool definition with the app resource URIs of its
// _meta exported under server's names, and the exported URI the tool
// points at ("" for a tool that is no app's).
func AppTool(server string, raw json.RawMessage) (json.RawMessage, string) {
	if !rawjson.Mentions(raw, "_meta") {
		return raw, ""
	}
	meta := rawjson.Member(raw, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		return raw, ""
	}
	export := func(v []byte) ([]byte, bool) {
		uri, ok := rawjson.String(v)
		if !ok || !naming.IsAppURI(uri) {
			return nil, false
		}
		return rawjson.AppendString(nil, naming.AppURI(server, uri)), true
	}
	next := meta
	if ui := rawjson.Member(meta, "ui"); len(ui) > 0 && ui[0] == '{' {
		if nextUI, ok := rawjson.Replace(ui, "resourceUri", export); ok {
			next, _ = rawjson.Replace(next, "ui", func([]byte) ([]byte, bool) { return nextUI, true })
		}
	}
	next, _ = rawjson.Replace(next, "ui/resourceUri", export)
	app, ok := rawjson.String(rawjson.Member(rawjson.Member(next, "ui"), "resourceUri"))
	if !ok {
		app, _ = rawjson.String(rawjson.Member(next, "ui/resourceUri"))
	}
	if !naming.IsAppURI(app) {
		app = ""
	}
	if len(next) == len(meta) && string(next) == string(meta) {
		return raw, app
	}
	out, _ := rawjson.Replace(raw, "_meta", func([]byte) ([]byte, bool) { return next, true })
	return out, app
}
