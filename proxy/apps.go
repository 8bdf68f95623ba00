package proxy

import (
	"encoding/json"
	"slices"

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
	var items []json.RawMessage
	if json.Unmarshal(rawjson.Member(resp.Result, "contents"), &items) != nil {
		return resp
	}
	changed := false
	for i, item := range items {
		uri, ok := rawjson.String(rawjson.Member(item, "uri"))
		if ok && naming.IsAppURI(uri) {
			items[i] = withMember(item, "uri", naming.AppURI(server, uri))
			changed = true
		}
	}
	if !changed {
		return resp
	}
	list := []byte{'['}
	for i, item := range items {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, item...)
	}
	list = append(list, ']')
	out, _ := rawjson.Replace(resp.Result, "contents", func([]byte) ([]byte, bool) { return list, true })
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

// appOwner says which server serves the exported app resource uri: the
// server its name carries, when that server offers resources in this
// surface and the URI is not hidden from it.
func (s *Surface) appOwner(uri string) (server string, app, ok bool) {
	server, _, app = naming.AppOriginal(uri)
	if !app {
		return "", false, false
	}
	if s.hiddenApps[uri] || !slices.Contains(s.caps.resourceServers, server) {
		return "", true, false
	}
	return server, true, true
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

// mergeExtensions adds the extensions an upstream declares to those of the
// servers before it. An extension any server offers is offered; its
// settings are the first server's (in config order), with the members of
// later servers' settings objects that the first lacks added, every value
// as its server sent it: fields the aggregator does not know pass
// untouched.
func mergeExtensions(into map[string]json.RawMessage, declared json.RawMessage) map[string]json.RawMessage {
	var ext map[string]json.RawMessage
	if len(declared) == 0 || json.Unmarshal(declared, &ext) != nil {
		return into
	}
	for _, id := range sortedKeys(ext) {
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

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
