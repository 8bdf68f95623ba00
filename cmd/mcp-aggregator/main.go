package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/configsource"
	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
)

// version and commit are stamped at build time (scripts/release.sh):
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/mcp-aggregator
//
// Unstamped, readStamp falls back on what the Go toolchain recorded.
var (
	version = defaultVersion
	commit  = ""
)

const defaultVersion = "0.1.0-dev"

const usage = `mcp-aggregator: one MCP server that fronts many.

Usage:
  mcp-aggregator [serve] [--config FILE]... [--http ADDR]  serve (stdio by default; --http serves http://ADDR/mcp)
  mcp-aggregator check   [--config FILE]...                validate the config, print problems; exit 1 on any error
  mcp-aggregator tools   [--config FILE]... [--json]       start the upstreams, print the exported catalog
  mcp-aggregator client-config CLIENT [--config FILE]... [--name NAME]
                                                           print what to add to CLIENT's config to use this binary
                                                           (claude-code, claude-desktop, cursor, vscode, gemini, codex, inspector)
  mcp-aggregator import [--exclude ID]... [--output FILE] FILE...
                                                           write a client's config (mcpServers JSON, VS Code,
                                                           TENEX, HoloDeck, chatagent) as mcp-aggregator YAML;
                                                           nothing, and exit 1, if the result would not run
  mcp-aggregator login SERVER [--config FILE]... [--no-browser]
                                                           log in to a server with auth: {type: oauth}; the
                                                           tokens are kept in the user's config directory;
                                                           --client-metadata prints the client ID metadata
                                                           document to host at oauth.client_id_url instead
  mcp-aggregator logout SERVER [--config FILE]...          remove the stored tokens of SERVER
  mcp-aggregator version                                   print the version, commit and Go version (also --version)

Config files: the --config flags; else MCP_AGGREGATOR_CONFIG (files separated
like PATH); else the first of ./mcp-aggregator.yaml and ./.minds/mcp.yaml in
the working directory; with none, every command uses a built-in demo config.
A file may be mcp-aggregator YAML or the config of another MCP client.

Exit status: 0 ok; 1 config errors or a failure; 2 a command line that cannot be used.
Run 'mcp-aggregator COMMAND --help' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		cmd, args = "help", nil
	} else if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-V") {
		cmd, args = "version", nil
	} else if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, stdin, stdout, stderr)
	case "check":
		return check(args, stdout, stderr)
	case "tools":
		return tools(args, stdout, stderr)
	case "version":
		if len(args) > 0 && args[0] != "-h" && args[0] != "--help" && args[0] != "-help" {
			fmt.Fprintf(stderr, "version: unexpected argument %q\n", args[0])
			return 2
		}
		printVersion(stdout)
		return 0
	case "client-config":
		return clientConfig(args, stdout, stderr)
	case "import":
		return importConfigs(args, stdout, stderr)
	case "login":
		return login(args, stdout, stderr)
	case "logout":
		return logout(args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "demo-server": // hidden: the demo upstreams compiled into this binary
		if len(args) == 0 {
			fmt.Fprintf(stderr, "demo-server: name one of %s\n", strings.Join(demo.Names(), ", "))
			return 2
		}
		if err := demo.Run(context.Background(), args[0], args[1:], stdin, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "demo-server:", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(stderr, "mcp-aggregator: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

// configFlags is a repeatable --config.
type configFlags []string

func (c *configFlags) String() string     { return strings.Join(*c, ",") }
func (c *configFlags) Set(v string) error { *c = append(*c, v); return nil }

// common are the flags every command that loads config shares.
type common struct {
	configs   configFlags
	logLevel  string
	logFormat string
	secrets   redact.Set // every secret value of the configs loaded so far
}

func (c *common) register(fs *flag.FlagSet) {
	fs.Var(&c.configs, "config", "config `FILE` (repeatable; later files replace servers with the same id; default: $"+configsource.EnvVar+", then ./mcp-aggregator.yaml or ./.minds/mcp.yaml)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
}

func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch c.logFormat {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: use text or json", c.logFormat)
	}
	// Every line, whatever it is about, is scrubbed of every secret the loaded
	// configs hold (see source).
	return slog.New(c.secrets.Handler(h)), nil
}

// source finds the config the command line and the environment name, its
// loads teaching their secrets to the set the logger scrubs.
func (c *common) source() configsource.Source {
	src := configsource.Resolve(c.configs, os.Getenv)
	src.Secrets = &c.secrets
	return src
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return false, 2
	}
	return true, 0
}
