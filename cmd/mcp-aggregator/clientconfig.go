package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/clientconfig"
	"github.com/mcp-aggregator/mcp-aggregator/configsource"
)

// clientConfig prints the snippet that plugs this binary, with its config pinned by
// absolute path, into one client (see clientconfig).
func clientConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("client-config", flag.ContinueOnError)
	var configs configFlags
	fs.Var(&configs, "config", "config `FILE` to pin (repeatable; default: the one the other commands would use here)")
	name := fs.String("name", "mcp-aggregator", "the server's `NAME` in the client")
	names := strings.Join(clientconfig.Names(), ", ")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mcp-aggregator client-config CLIENT [--config FILE]... [--name NAME]\nCLIENT is one of %s\n", names)
		fs.PrintDefaults()
	}
	// The client comes first, the flags after it.
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs.SetOutput(stderr)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fs.Usage()
			return 0
		}
		fmt.Fprintf(stderr, "client-config: name a client: %s\n", names)
		return 2
	}
	client, ok := clientconfig.Lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "client-config: unknown client %q; use one of %s\n", args[0], names)
		return 2
	}
	if ok, code := parse(fs, args[1:], stderr); !ok {
		return code
	}
	if strings.TrimSpace(*name) == "" {
		fmt.Fprintln(stderr, "client-config: --name is empty; give the name the client should show, such as mcp-aggregator")
		return 2
	}

	var arg0 string
	if len(os.Args) > 0 {
		arg0 = os.Args[0]
	}
	command, err := clientconfig.Command(arg0)
	if err != nil {
		fmt.Fprintln(stderr, "client-config: cannot tell where this binary is:", err)
		return 1
	}
	if clientconfig.TemporaryBuild(command) {
		fmt.Fprintln(stderr, "note: this binary is a temporary build of go run; install it (go install or go build -o) and run client-config from the installed one")
	}
	src := configsource.Resolve(configs, os.Getenv)
	if src.Demo {
		fmt.Fprintln(stderr, "note: no config found here, so the snippet runs the built-in demo config; pass --config FILE to pin yours")
	}
	pinned, missing := clientconfig.Pin(src.Paths)
	for _, m := range missing {
		fmt.Fprintf(stderr, "note: %s does not exist yet; the aggregator serves no servers until it does\n", m)
	}
	fmt.Fprintln(stderr, "# "+client.Where)
	fmt.Fprint(stdout, client.Snippet(clientconfig.Launch{Name: *name, Command: command, Configs: pinned}))
	return 0
}
