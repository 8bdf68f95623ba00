package upstream

import (
	"encoding/json"
)

// Capabilities are what the upstream declared in its initialize result. A
// capability counts as declared when its member is present and neither null
// nor false; a sub-capability (listChanged, subscribe) only when it is true.
type Capabilities struct {
	// Raw is the capabilities object exactly as the upstream sent it.
	Raw json.RawMessage

	Tools, ToolsListChanged                             bool
	Resources, ResourcesSubscribe, ResourcesListChanged bool
	Prompts, PromptsListChanged                         bool
	Completions, Logging, Tasks                         bool
	// Extensions is the extensions member, a map of extension identifiers
	// to their settings objects, as the upstream sent it; nil when absent
	// or not an object.
	Extensions json.RawMessage
}

// clientCapabilities is what the aggregator declares to every upstream: the
// requests it relays to its own clients, so that upstreams send them at all.
// Whether a given downstream session can take one is the proxy's to decide;
// the upstream is told at once when it cannot.
//
// It declares the MCP Apps extension (io.modelcontextprotocol/ui) with the
// one MIME type the extension defines: the aggregator serves each server's
// ui:// resources to the hosts that render them, under names of their own,
// so a server that registers app tools only for hosts that can show them
// shows them through the aggregator. A host without the extension sees such
// tools as ordinary tools, their text results included.
var clientCapabilities = json.RawMessage(`{"elicitation":{"form":{},"url":{}},"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}},"roots":{"listChanged":true},"sampling":{}}`)

// parseCapabilities reads the capabilities object of an initialize result.
// A malformed member declares nothing; it never fails the handshake.
func parseCapabilities(raw json.RawMessage) Capabilities {
	c := Capabilities{Raw: raw}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return c
	}
	var tools, resources, prompts json.RawMessage
	tools, c.Tools = declared(members, "tools")
	resources, c.Resources = declared(members, "resources")
	prompts, c.Prompts = declared(members, "prompts")
	_, c.Completions = declared(members, "completions")
	_, c.Logging = declared(members, "logging")
	_, c.Tasks = declared(members, "tasks")
	if ext, ok := declared(members, "extensions"); ok && len(ext) > 0 && ext[0] == '{' {
		c.Extensions = ext
	}
	c.ToolsListChanged = flag(tools, "listChanged")
	c.ResourcesSubscribe = flag(resources, "subscribe")
	c.ResourcesListChanged = flag(resources, "listChanged")
	c.PromptsListChanged = flag(prompts, "listChanged")
	return c
}

// declared returns the member name of members and whether it declares the
// capability: present, and neither null nor false.
func declared(members map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	v, ok := members[name]
	if !ok || string(v) == "null" || string(v) == "false" {
		return nil, false
	}
	return v, true
}

// flag reports whether the object obj has the member name set to true.
func flag(obj json.RawMessage, name string) bool {
	var members map[string]json.RawMessage
	if len(obj) == 0 || json.Unmarshal(obj, &members) != nil {
		return false
	}
	return string(members[name]) == "true"
}
