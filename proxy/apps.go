package proxy

import (
	"encoding/json"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// MCP Apps (the io.modelcontextprotocol/ui extension): a tool's
// _meta.ui.resourceUri (and the deprecated flat _meta["ui/resourceUri"],
// kept equal to it) names a ui:// resource that a host reads and renders.
// Every server's ui:// resources are exported as naming.AppURI names them,
// ui://<server>/<rest>, in the resource lists, in the tools' _meta and in
// what resources/read answers, and mapped back on the way upstream; so two
// servers that both serve ui://main never collide.

// uiExtension is the identifier of the MCP Apps extension.
const uiExtension = "io.modelcontextprotocol/ui"

// withMember returns obj with its member name set to the JSON string s.
func withMember(obj json.RawMessage, name, s string) json.RawMessage {
	out, _ := rawjson.Replace(obj, name, func([]byte) ([]byte, bool) { return rawjson.AppendString(nil, s), true })
	return out
}

// appContents exports, under server's names, the ui:// URIs of the
// contents of a resources/read result.
func appContents(server string, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp == nil || len(resp.Result) == 0 || !rawjson.Mentions(resp.Result, "contents") {
		return resp
	}
	out, changed := rawjson.EditItems(resp.Result, "contents", func(item []byte) ([]byte, bool) {
		uri, ok := rawjson.String(rawjson.Member(item, "uri"))
		if !ok || !naming.IsAppURI(uri) {
			return nil, false
		}
		return withMember(item, "uri", naming.AppURI(server, uri)), true
	})
	if !changed {
		return resp
	}
	copied := *resp
	copied.Result = out
	return &copied
}

// appUpstream maps the URI of a resources request to the one server
// serves: an exported app resource URI to the server's own, in params.
func appUpstream(server, uri string, params json.RawMessage) (json.RawMessage, bool) {
	owner, original, ok := naming.AppOriginal(uri)
	if !ok || owner != server {
		return params, false
	}
	return withMember(params, "uri", original), true
}

// hiddenApps are the exported app resource URIs a profile hides with its
// tools: those that only tools the profile does not admit point at. A
// profile that admits every tool of its servers hides none.
func (st *state) hiddenApps(pr *profile) map[string]bool {
	if pr == nil || pr.tools == nil {
		return nil
	}
	shown := map[string]bool{}
	var hidden map[string]bool
	for _, e := range st.catalog.Entries() {
		if e.App == "" || !pr.server(e.Server) {
			continue
		}
		if pr.tool(e) {
			shown[e.App] = true
			continue
		}
		if hidden == nil {
			hidden = map[string]bool{}
		}
		hidden[e.App] = true
	}
	for uri := range shown {
		delete(hidden, uri)
	}
	return hidden
}

// TasksExtension is the 2026-07-28 tasks extension: a tools/call may be
// answered with a task handle (resultType "task"), polled with tasks/get,
// given input with tasks/update and cancelled with tasks/cancel (see
// extensiontasks.go).
const TasksExtension = "io.modelcontextprotocol/tasks"

// sessionlessExtensions are the extensions offered to sessionless clients
// only (server/discover): a session of the older generation has the core
// tasks capability instead, and the aggregator does not bridge the two.
var sessionlessExtensions = map[string]bool{TasksExtension: true}
