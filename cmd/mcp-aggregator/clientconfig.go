package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// clientSnippet renders what one client needs to run the aggregator: name is the
// server's name in the client, command and args run it, configs are absolute paths.
type clientSnippet struct {
	where  string // where the snippet goes
	render func(name, command string, args, configs []string) string
}

// clients are the MCP clients client-config knows, by the name the user types.
var clients = map[string]clientSnippet{
	"claude-code": {
		where: "run this in a shell (--scope user: every project; project: a .mcp.json in this one)",
		render: func(name, command string, args, _ []string) string {
			return "claude mcp add --scope user " + shellQuote(name) + " -- " + shellLine(append([]string{command}, args...)) + "\n"
		},
	},
	"claude-desktop": {
		where: "merge into claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\), then restart Claude Desktop",
		render: func(name, command string, args, _ []string) string {
			return jsonSnippet("mcpServers", name, map[string]any{"command": command, "args": args})
		},
	},
	"cursor": {
		where: "merge into ~/.cursor/mcp.json (every project) or .cursor/mcp.json (this project)",
		render: func(name, command string, args, _ []string) string {
			return jsonSnippet("mcpServers", name, map[string]any{"command": command, "args": args})
		},
	},
	"vscode": {
		where: "merge into .vscode/mcp.json (this workspace), or run: code --add-mcp '{\"name\":...}' with the server object",
		render: func(name, command string, args, _ []string) string {
			return jsonSnippet("servers", name, map[string]any{"type": "stdio", "command": command, "args": args})
		},
	},
	"gemini": {
		where: "merge into ~/.gemini/settings.json (every project) or .gemini/settings.json (this project)",
		render: func(name, command string, args, _ []string) string {
			return jsonSnippet("mcpServers", name, map[string]any{"command": command, "args": args})
		},
	},
	"codex": {
		where: "append to ~/.codex/config.toml",
		render: func(name, command string, args, _ []string) string {
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = tomlString(a)
			}
			return fmt.Sprintf("[mcp_servers.%s]\ncommand = %s\nargs = [%s]\n", tomlKey(name), tomlString(command), strings.Join(quoted, ", "))
		},
	},
	"inspector": {
		where: "run this in a shell; the Inspector takes --config for itself, so the config goes in " + configEnvVar,
		render: func(_, command string, _, configs []string) string {
			line := []string{"npx", "@modelcontextprotocol/inspector"}
			if len(configs) > 0 {
				line = append(line, "-e", configEnvVar+"="+strings.Join(configs, string(filepath.ListSeparator)))
			}
			return shellLine(append(line, command)) + "\n"
		},
	},
}

// clientConfig prints the snippet that plugs this binary, with its config pinned by
// absolute path, into one client: a client starts its servers in a working directory
// of its own choosing, where no default config would be found.
func clientConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("client-config", flag.ContinueOnError)
	var configs configFlags
	fs.Var(&configs, "config", "config `FILE` to pin (repeatable; default: the one the other commands would use here)")
	name := fs.String("name", "mcp-aggregator", "the server's `NAME` in the client")
	names := make([]string, 0, len(clients))
	for n := range clients {
		names = append(names, n)
	}
	sort.Strings(names)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mcp-aggregator client-config CLIENT [--config FILE]... [--name NAME]\nCLIENT is one of %s\n", strings.Join(names, ", "))
		fs.PrintDefaults()
	}
	// The client comes first, the flags after it.
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs.SetOutput(stderr)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fs.Usage()
			return 0
		}
		fmt.Fprintf(stderr, "client-config: name a client: %s\n", strings.Join(names, ", "))
		return 2
	}
	client, ok := clients[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "client-config: unknown client %q; use one of %s\n", args[0], strings.Join(names, ", "))
		return 2
	}
	if ok, code := parse(fs, args[1:], stderr); !ok {
		return code
	}
	if strings.TrimSpace(*name) == "" {
		fmt.Fprintln(stderr, "client-config: --name is empty; give the name the client should show, such as mcp-aggregator")
		return 2
	}

	command, err := selfPath()
	if err != nil {
		fmt.Fprintln(stderr, "client-config: cannot tell where this binary is:", err)
		return 1
	}
	if strings.Contains(command, "go-build") {
		fmt.Fprintln(stderr, "note: this binary is a temporary build of go run; install it (go install or go build -o) and run client-config from the installed one")
	}
	src := resolveConfig(configs, os.Getenv)
	var abs []string
	if src.demo {
		fmt.Fprintln(stderr, "note: no config found here, so the snippet runs the built-in demo config; pass --config FILE to pin yours")
	}
	for _, p := range src.paths {
		a, err := filepath.Abs(p)
		if err != nil {
			a = p
		}
		if _, err := os.Stat(a); err != nil {
			fmt.Fprintf(stderr, "note: %s does not exist yet; the aggregator serves no servers until it does\n", a)
		}
		abs = append(abs, a)
	}
	args = []string{"serve"}
	for _, a := range abs {
		args = append(args, "--config", a)
	}
	fmt.Fprintln(stderr, "# "+client.where)
	fmt.Fprint(stdout, client.render(*name, command, args, abs))
	return 0
}

// selfPath is the absolute path a client should start this binary by: the one
// the command line named it by (the user's PATH, or a path) when that leads to
// this very file, since a package manager's symlink there outlives an upgrade
// that replaces its target; else the executable itself, symlinks resolved.
func selfPath() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", err
	}
	if len(os.Args) == 0 || os.Args[0] == "" {
		return exe, nil
	}
	named, err := exec.LookPath(os.Args[0])
	if err != nil {
		return exe, nil
	}
	if named, err = filepath.Abs(named); err != nil {
		return exe, nil
	}
	if real, err := filepath.EvalSymlinks(named); err != nil || real != exe {
		return exe, nil
	}
	return named, nil
}

// jsonSnippet renders {"<container>": {"<name>": server}} as indented JSON.
func jsonSnippet(container, name string, server map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{container: map[string]any{name: server}})
	return buf.String()
}

// shellLine quotes words for a POSIX shell.
func shellLine(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = shellQuote(w)
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tomlString renders a TOML basic string; JSON's escapes are valid TOML ones.
func tomlString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// tomlKey renders a TOML key: bare when it may be, else quoted.
func tomlKey(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == "" {
		return s
	}
	return tomlString(s)
}
