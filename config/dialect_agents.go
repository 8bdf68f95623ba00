package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Agent frameworks keep their MCP servers inside a larger agent definition: HoloDeck as
// entries of type mcp in an agent.yaml's tools list, chatagent as the mcps list of its
// toolbox. Only those parts are read; the rest of the file belongs to the framework.

// holoDeckKeys are the keys of a HoloDeck MCP tool entry (seed 002).
var holoDeckKeys = []string{
	"name", "description", "type", "server", "transport", "command", "args", "env", "envFile", "encoding",
	"url", "headers", "timeout", "sse_read_timeout", "terminate_on_close", "config", "load_tools",
	"load_prompts", "request_timeout",
}

// translateHoloDeck reads the tools of type mcp of a HoloDeck agent.yaml.
func translateHoloDeck(fc fileContext, root *yaml.Node) *translation {
	t := newTranslation(DialectHoloDeck, fc.file, root.Line)
	tools := deref(topPairs(root)["tools"].v)
	for _, item := range tools.Content {
		if f := topPairs(item); scalarText(f["type"].v) == "mcp" {
			t.keep(scalarText(f["name"].v))
		}
	}
	for i, item := range tools.Content {
		if !isMapping(item) || scalarText(topPairs(item)["type"].v) != "mcp" {
			continue // a tool of another kind: the agent's, not ours
		}
		f := topPairs(item)
		name := scalarText(f["name"].v)
		if name == "" {
			t.problems.errorf(item.Line, fmt.Sprintf("tools[%d].name", i), "an MCP tool needs a name, which becomes its server id; add name:")
			continue
		}
		s := t.server(name, f["name"].v, fmt.Sprintf("tools[%d] (%s)", i, name))
		var ignored []pair
		own, merged := mappingPairs(item)
		for _, p := range append(own, merged...) {
			switch p.key {
			case "name", "description", "type", "server":
			case "transport", "command", "args", "env", "url", "headers", "request_timeout":
				s.set(p.key, p.k, p.v)
			case "envFile":
				s.set("env_file", p.k, p.v)
			case "timeout":
				s.set("connect_timeout", p.k, p.v)
			case "encoding":
				if e := strings.ToLower(strings.ReplaceAll(scalarText(p.v), "-", "")); e != "utf8" {
					s.warnf(p.v.Line, p.key, "only UTF-8 is read from servers; the setting is ignored")
				}
			case "config":
				s.warnf(p.k.Line, p.key, "HoloDeck hands this to the server at start; mcp-aggregator has no such channel, so pass it with args or env; ignored")
			case "load_tools":
				if scalarText(p.v) == "false" {
					tools := s.sub("tools", p.k.Line)
					addPair(tools, "blacklist", p.k.Line, sequenceNode(p.v.Line, scalarNode("*", "!!str", p.v.Line)))
					s.fields["tools.blacklist"] = "load_tools"
				}
			case "sse_read_timeout", "terminate_on_close", "load_prompts":
				ignored = append(ignored, p)
			default:
				hint := ""
				if c := closest(p.key, holoDeckKeys); c != "" {
					hint = fmt.Sprintf("did you mean %q? ", c)
				}
				s.warnf(p.k.Line, p.key, "unknown key, ignored; %sknown keys: %s", hint, strings.Join(holoDeckKeys, ", "))
			}
		}
		s.ignoredKeys(ignored, "a HoloDeck setting that mcp-aggregator has no counterpart for", "HoloDeck settings that mcp-aggregator has no counterpart for")
		_, hasCommand := f["command"]
		_, hasURL := f["url"]
		if pkg := scalarText(f["server"].v); !hasCommand && !hasURL && pkg != "" {
			// HoloDeck's legacy form: the server field names an npm package.
			line := f["server"].k.Line
			s.set("command", nil, scalarNode("npx", "!!str", line))
			s.set("args", nil, sequenceNode(line, scalarNode("-y", "!!str", line), scalarNode(pkg, "!!str", line)))
			s.warnf(line, "server", "no command: started as npx -y %s, as HoloDeck's legacy format does; write command: and args: explicitly", safeName(pkg))
		}
	}
	return t
}

// chatagentKeys are the keys of a chatagent mcps entry (seed 004).
var chatagentKeys = []string{"name", "url", "transport", "mode", "default_tool_config", "prompts"}

// chatagentMCPs finds the mcps list: at the top, under toolbox, or under APP.toolbox
// as in chatagent's own config (myai.toolbox.mcps). It returns nil when there is none.
func chatagentMCPs(root *yaml.Node) *chatagentBox {
	top := topPairs(root)
	if p, ok := top["mcps"]; ok {
		return &chatagentBox{mcps: p}
	}
	if box := toolboxOf(root); box != nil {
		return box
	}
	own, _ := mappingPairs(root)
	for _, p := range own {
		if isMapping(p.v) {
			if box := toolboxOf(p.v); box != nil {
				return box
			}
		}
	}
	return nil
}

// chatagentBox is the part of a chatagent config that is read.
type chatagentBox struct {
	mcps    pair
	toolbox *yaml.Node // nil when mcps is at the top
}

func toolboxOf(n *yaml.Node) *chatagentBox {
	p, ok := topPairs(n)["toolbox"]
	if !ok || !isMapping(p.v) {
		return nil
	}
	box := deref(p.v)
	if m, ok := topPairs(box)["mcps"]; ok {
		return &chatagentBox{mcps: m, toolbox: box}
	}
	return nil
}

// translateChatagent reads a chatagent config: each mcps entry is a server; the
// toolbox's max_concurrent is the global limit and its tools list is every server's
// per-tool config (chatagent configures tools by name, whichever server offers them).
func translateChatagent(fc fileContext, root *yaml.Node) *translation {
	t := newTranslation(DialectChatagent, fc.file, root.Line)
	box := chatagentMCPs(root)
	var toolConfig *yaml.Node
	if box.toolbox != nil {
		f := topPairs(box.toolbox)
		if p, ok := f["max_concurrent"]; ok {
			addPair(t.limitsNode(p.k.Line), "max_concurrent", p.k.Line, p.v)
		}
		if p, ok := f["tools"]; ok {
			toolConfig = chatagentToolConfig(t, p)
		}
	}
	list := deref(box.mcps.v)
	if isNull(list) {
		return t
	}
	if list.Kind != yaml.SequenceNode {
		t.problems.errorf(list.Line, "mcps", "must be a list of MCP servers, each with name: and url:")
		return t
	}
	for _, item := range list.Content {
		t.keep(scalarText(topPairs(item)["name"].v))
	}
	for i, item := range list.Content {
		f := topPairs(item)
		name := scalarText(f["name"].v)
		if !isMapping(item) || name == "" {
			t.problems.errorf(item.Line, fmt.Sprintf("mcps[%d].name", i), "each MCP server needs a name, which becomes its server id; add name:")
			continue
		}
		s := t.server(name, f["name"].v, fmt.Sprintf("mcps[%d] (%s)", i, name))
		own, merged := mappingPairs(item)
		for _, p := range append(own, merged...) {
			switch p.key {
			case "name":
			case "url", "transport":
				s.set(p.key, p.k, p.v)
			case "mode":
				addPair(s.sub("tools", p.k.Line), "mode", p.k.Line, p.v)
				s.fields["tools.mode"] = "mode"
			case "default_tool_config":
				addPair(s.sub("tools", p.k.Line), "defaults", p.k.Line, withoutKey(p.v, "name"))
				s.fields["tools.defaults"] = "default_tool_config"
			case "prompts":
				if n := deref(p.v); n.Kind == yaml.SequenceNode && len(n.Content) > 0 {
					s.warnf(p.k.Line, p.key, "prompts are not selected per server here; ignored")
				}
			default:
				hint := ""
				if c := closest(p.key, chatagentKeys); c != "" {
					hint = fmt.Sprintf("did you mean %q? ", c)
				}
				s.warnf(p.k.Line, p.key, "unknown key, ignored; %sknown keys: %s", hint, strings.Join(chatagentKeys, ", "))
			}
		}
		if _, ok := f["mode"]; !ok {
			s.warnf(item.Line, "mode", "chatagent requires mode (strict or dynamic); without it mcp-aggregator uses dynamic: unconfigured tools get default_tool_config")
		}
		if toolConfig != nil {
			addPair(s.sub("tools", item.Line), "config", toolConfig.Line, toolConfig)
			s.fields["tools.config"] = "toolbox.tools"
		}
	}
	return t
}

// chatagentToolConfig turns toolbox.tools ([{name, max_instances, timeout}]) into a
// native tools.config mapping keyed by tool name.
func chatagentToolConfig(t *translation, p pair) *yaml.Node {
	list := deref(p.v)
	if isNull(list) {
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		t.problems.errorf(list.Line, "toolbox.tools", "must be a list of {name, max_instances, timeout}")
		return nil
	}
	config := mappingNode(list.Line)
	for i, item := range list.Content {
		name := scalarText(topPairs(item)["name"].v)
		if !isMapping(item) || name == "" {
			t.problems.errorf(item.Line, fmt.Sprintf("toolbox.tools[%d].name", i), "each tool needs a name; add name:")
			continue
		}
		addPair(config, name, item.Line, withoutKey(item, "name"))
	}
	if len(config.Content) == 0 {
		return nil
	}
	return config
}

// withoutKey copies a mapping without one key; other nodes are returned as they are.
func withoutKey(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return n
	}
	out := *n
	out.Content = nil
	own, merged := mappingPairs(n)
	for _, p := range append(own, merged...) {
		if p.key != key {
			addPairNode(&out, p.k, p.v)
		}
	}
	return &out
}
