package clientconfig

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/configsource"
)

// Launch is how a client is to start the aggregator.
type Launch struct {
	Name    string   // the server's name in the client
	Command string   // the absolute path of the binary
	Configs []string // the config files, absolute; none for the demo config
}

// Args are the arguments a client starts the aggregator with: serve, and a
// --config for each config file.
func (l Launch) Args() []string {
	args := []string{"serve"}
	for _, c := range l.Configs {
		args = append(args, "--config", c)
	}
	return args
}

// Client is one MCP client's way of adding a server.
type Client struct {
	// Where says where the snippet goes: a file to merge it into, or a
	// shell to run it in.
	Where  string
	render func(Launch) string
}

// Snippet is what to add to the client's config, or to run, for l.
func (c Client) Snippet(l Launch) string { return c.render(l) }

// clients are the MCP clients client-config knows, by the name the user types.
var clients = map[string]Client{
	"claude-code": {
		Where: "run this in a shell (--scope user: every project; project: a .mcp.json in this one)",
		render: func(l Launch) string {
			return "claude mcp add --scope user " + shellQuote(l.Name) + " -- " + shellLine(append([]string{l.Command}, l.Args()...)) + "\n"
		},
	},
	"claude-desktop": {
		Where:  "merge into claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\), then restart Claude Desktop",
		render: mcpServers,
	},
	"cursor": {
		Where:  "merge into ~/.cursor/mcp.json (every project) or .cursor/mcp.json (this project)",
		render: mcpServers,
	},
	"vscode": {
		Where: "merge into .vscode/mcp.json (this workspace), or run: code --add-mcp '{\"name\":...}' with the server object",
		render: func(l Launch) string {
			return jsonSnippet("servers", l.Name, map[string]any{"type": "stdio", "command": l.Command, "args": l.Args()})
		},
	},
	"gemini": {
		Where:  "merge into ~/.gemini/settings.json (every project) or .gemini/settings.json (this project)",
		render: mcpServers,
	},
	"codex": {
		Where: "append to ~/.codex/config.toml",
		render: func(l Launch) string {
			args := l.Args()
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = tomlString(a)
			}
			return fmt.Sprintf("[mcp_servers.%s]\ncommand = %s\nargs = [%s]\n", tomlKey(l.Name), tomlString(l.Command), strings.Join(quoted, ", "))
		},
	},
	"inspector": {
		Where: "run this in a shell; the Inspector takes --config for itself, so the config goes in " + configsource.EnvVar,
		render: func(l Launch) string {
			line := []string{"npx", "@modelcontextprotocol/inspector"}
			if len(l.Configs) > 0 {
				line = append(line, "-e", configsource.EnvVar+"="+strings.Join(l.Configs, string(filepath.ListSeparator)))
			}
			return shellLine(append(line, l.Command)) + "\n"
		},
	},
}

// mcpServers renders the mcpServers JSON most clients read.
func mcpServers(l Launch) string {
	return jsonSnippet("mcpServers", l.Name, map[string]any{"command": l.Command, "args": l.Args()})
}

// Lookup returns the client the user named.
func Lookup(name string) (Client, bool) {
	c, ok := clients[name]
	return c, ok
}

// Names are the names of the clients Lookup knows, sorted.
func Names() []string {
	names := make([]string, 0, len(clients))
	for n := range clients {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
