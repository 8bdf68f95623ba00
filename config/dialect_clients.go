package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// The clients' JSON: Claude Desktop, Cursor, Claude Code's .mcp.json and Gemini CLI keep
// servers under mcpServers; VS Code and TENEX under servers. Their entries share most
// keys (command, args, env, url, headers) and name the transport type, transportType or
// not at all; each client adds a few keys of its own.

// clientKeys are the keys a client's server entry may have that are read here.
var clientKeys = []string{
	"command", "args", "env", "cwd", "envFile", "type", "transportType", "transport",
	"url", "serverUrl", "httpUrl", "headers", "includeTools", "excludeTools", "disabled", "description", "name",
}

// clientOnlyKeys are settings of one client or another that have no meaning in the
// aggregator: they are reported once per server, not as unknown keys.
var clientOnlyKeys = map[string]bool{
	"alwaysAllow": true, "autoApprove": true, "trust": true, "timeout": true, "oauth": true,
	"authProviderType": true, "dev": true, "gallery": true, "version": true, "icon": true,
	"disabledTools": true, "networkTimeout": true, "autoStart": true,
}

// translateClients reads mcpServers JSON (servers is that mapping) or VS Code's or
// TENEX's servers JSON.
func translateClients(d Dialect, fc fileContext, root *yaml.Node) *translation {
	t := newTranslation(d, fc.file, root.Line)
	top := topPairs(root)
	container := root
	if d == DialectVSCode {
		if p, ok := top["mcp"]; ok && isMapping(p.v) {
			if _, ok := top["servers"]; !ok {
				container = deref(p.v) // settings.json: "mcp": {"servers": ..., "inputs": ...}
				top = topPairs(container)
			}
		}
	}
	key := "servers"
	if d == DialectMCPServers {
		key = "mcpServers"
	}
	vars := clientVars{dir: fc.dir, inputs: readInputs(top["inputs"])}
	if d == DialectVSCode || d == DialectTENEX {
		known := []string{"servers", "inputs", "enabled"}
		r := &reader{problemList: problemList{file: fc.file}}
		r.fields(container, "", known...)
		t.problems.problems = append(t.problems.problems, r.problems...)
		if p, ok := top["enabled"]; ok && scalarText(p.v) == "false" {
			t.problems.warnf(p.v.Line, "enabled", "enabled is false: no server of this file is started; set it to true or remove it")
			return t
		}
	}
	p, ok := top[key]
	if !ok || isNull(p.v) {
		return t
	}
	if !isMapping(p.v) {
		t.problems.errorf(p.v.Line, key, "must be an object of server name: settings")
		return t
	}
	own, merged := mappingPairs(p.v)
	entries := append(own, merged...)
	for _, e := range entries {
		t.keep(e.key)
	}
	for _, e := range entries {
		translateClientServer(t, vars, key, e)
	}
	return t
}

// translateClientServer maps one client server entry to a native server.
func translateClientServer(t *translation, vars clientVars, container string, e pair) {
	if isMapping(e.v) {
		if p, ok := topPairs(e.v)["disabled"]; ok && scalarText(p.v) == "true" {
			t.skipped = append(t.skipped, fmt.Sprintf("%s.%s (line %d) is disabled in the client and is left out", container, e.key, e.k.Line))
			return
		}
	}
	s := t.server(e.key, e.k, container+"."+e.key)
	if !isMapping(e.v) {
		s.out = e.v // the native reader explains what a server must be
		t.servers.Content[len(t.servers.Content)-1] = e.v
		return
	}
	var include, exclude *yaml.Node
	var ignored []pair
	own, merged := mappingPairs(e.v)
	for _, p := range append(own, merged...) {
		switch p.key {
		case "command", "args", "env", "cwd", "headers":
			s.set(p.key, p.k, vars.rewrite(s, p.v))
		case "envFile":
			s.set("env_file", p.k, vars.rewrite(s, p.v))
		case "url", "serverUrl":
			s.set("url", p.k, vars.rewrite(s, p.v))
		case "httpUrl": // Gemini CLI: streamable HTTP (its url means SSE)
			s.set("url", p.k, vars.rewrite(s, p.v))
			s.set("transport", nil, scalarNode(string(TransportHTTP), "!!str", p.k.Line))
		case "type", "transportType", "transport":
			s.set("transport", p.k, clientTransport(p.v))
		case "includeTools":
			include = p.v
		case "excludeTools":
			exclude = p.v
		case "disabled", "description", "name":
			// disabled: false is the default; the others only describe the server.
		case "allowedPaths":
			s.warnf(p.k.Line, p.key, "TENEX skips a server whose allowedPaths exclude the project; mcp-aggregator does not check this, so limit the server with its own arguments; ignored")
		default:
			if clientOnlyKeys[p.key] {
				ignored = append(ignored, p)
				continue
			}
			hint := ""
			if c := closest(p.key, clientKeys); c != "" {
				hint = fmt.Sprintf("did you mean %q? ", c)
			}
			s.warnf(p.k.Line, p.key, "unknown key, ignored; %sknown keys: %s", hint, strings.Join(clientKeys, ", "))
		}
	}
	s.ignoredKeys(ignored, "a setting of the client that means nothing to mcp-aggregator", "settings of the client that mean nothing to mcp-aggregator")
	if _, hasCwd := topPairs(e.v)["cwd"]; !hasCwd && vars.inWorkspace() {
		if _, stdio := topPairs(e.v)["command"]; stdio {
			// VS Code and Cursor start a project's servers in the project's folder.
			s.set("cwd", nil, scalarNode(vars.workspaceFolder(), "!!str", e.k.Line))
		}
	}
	toolFilters(s, include, exclude)
}

// clientTransport maps the clients' transport names to native ones; anything else is
// passed on for the native reader to reject.
func clientTransport(v *yaml.Node) *yaml.Node {
	switch strings.ToLower(scalarText(v)) {
	case "stdio":
		return scalarNode(string(TransportStdio), "!!str", v.Line)
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		return scalarNode(string(TransportHTTP), "!!str", v.Line)
	case "sse":
		return scalarNode(string(TransportSSE), "!!str", v.Line)
	}
	return v
}

// toolFilters maps Gemini CLI's includeTools and excludeTools. There, exclusion wins
// over inclusion and names are exact; so with both, the whitelist is the included names
// that are not excluded, which the native rules export exactly.
func toolFilters(s *serverNotes, include, exclude *yaml.Node) {
	if include == nil && exclude == nil {
		return
	}
	tools := s.sub("tools", s.key.Line)
	if include != nil {
		list := deref(include)
		if exclude != nil && list.Kind == yaml.SequenceNode {
			excluded := map[string]bool{}
			for _, x := range deref(exclude).Content {
				excluded[scalarText(x)] = true
			}
			kept := sequenceNode(list.Line)
			for _, item := range list.Content {
				if !excluded[scalarText(item)] {
					kept.Content = append(kept.Content, item)
				}
			}
			list = kept
		}
		addPair(tools, "whitelist", include.Line, list)
		s.fields["tools.whitelist"] = "includeTools"
		return
	}
	addPair(tools, "blacklist", exclude.Line, exclude)
	s.fields["tools.blacklist"] = "excludeTools"
}

// clientVars rewrites the ${...} variables of VS Code and Cursor into native terms.
type clientVars struct {
	dir    string            // the config file's directory
	inputs map[string]string // VS Code input id -> its description
}

var clientVarPattern = regexp.MustCompile(`\$\{([A-Za-z]+):([^}]*)\}|\$\{(workspaceFolder|userHome|pathSeparator|/)\}`)

// rewrite returns v with every string in it rewritten: ${env:NAME} becomes ${NAME};
// ${workspaceFolder} the folder holding .vscode or .cursor (else the file's directory);
// ${userHome} ${HOME}; ${input:ID} a host variable named after the input, since the
// aggregator cannot prompt. Other text is left for the native reader.
func (c clientVars) rewrite(s *serverNotes, v *yaml.Node) *yaml.Node {
	v = deref(v)
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag != "!!str" || !strings.Contains(v.Value, "${") {
			return v
		}
		out := *v
		out.Value = clientVarPattern.ReplaceAllStringFunc(v.Value, func(m string) string {
			sub := clientVarPattern.FindStringSubmatch(m)
			switch {
			case sub[3] == "workspaceFolder":
				return strings.ReplaceAll(c.workspaceFolder(), "$", "$$")
			case sub[3] == "userHome":
				return "${HOME}"
			case sub[3] == "pathSeparator" || sub[3] == "/":
				return string(filepath.Separator)
			case sub[1] == "env":
				return "${" + sub[2] + "}"
			case sub[1] == "input":
				name := inputVariable(sub[2])
				what := ""
				if d := c.inputs[sub[2]]; d != "" {
					what = fmt.Sprintf(" (%s)", safeName(d))
				}
				s.warnf(v.Line, "", "${input:%s}: the client would prompt for this value%s; the aggregator cannot prompt, so it reads the host variable %s instead: export it or put it in an env_file",
					safeName(sub[2]), what, name)
				return "${" + name + "}"
			}
			return m
		})
		return &out
	case yaml.SequenceNode, yaml.MappingNode:
		out := *v
		out.Content = make([]*yaml.Node, len(v.Content))
		for i, item := range v.Content {
			if v.Kind == yaml.MappingNode && i%2 == 0 {
				out.Content[i] = item // keys stay as written
				continue
			}
			out.Content[i] = c.rewrite(s, item)
		}
		return &out
	}
	return v
}

// workspaceFolder is where VS Code and Cursor would say the workspace is.
func (c clientVars) workspaceFolder() string {
	if c.inWorkspace() {
		return filepath.Dir(c.dir)
	}
	return c.dir
}

// inWorkspace reports whether the file is a project's .vscode/ or .cursor/ config.
func (c clientVars) inWorkspace() bool {
	switch filepath.Base(c.dir) {
	case ".vscode", ".cursor":
		return true
	}
	return false
}

// inputVariable names the host variable that stands in for a VS Code input:
// "github-token" becomes GITHUB_TOKEN.
func inputVariable(id string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(id) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		name = "_" + name
	}
	return name
}

// readInputs indexes VS Code's inputs by id, with their descriptions.
func readInputs(p pair) map[string]string {
	out := map[string]string{}
	n := deref(p.v)
	if n == nil || n.Kind != yaml.SequenceNode {
		return out
	}
	for _, item := range n.Content {
		if !isMapping(item) {
			continue
		}
		f := topPairs(item)
		if id := scalarText(f["id"].v); id != "" {
			out[id] = scalarText(f["description"].v)
		}
	}
	return out
}
