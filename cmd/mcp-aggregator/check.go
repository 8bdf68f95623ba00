package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/listing"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
	"github.com/mcp-aggregator/mcp-aggregator/upstreamauth"
)

// check validates the config without starting any upstream: it finds the config as
// serve and tools do, reports every problem, and warns about what would fail at start
// (a stdio command not on PATH) or what is probably a mistake (a file with no servers).
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var c common
	c.register(fs)
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if _, err := c.logger(stderr); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	src := c.source()
	var notes []config.Problem
	for _, n := range src.Notes {
		notes = append(notes, config.Problem{Severity: config.SeverityWarning, Message: n})
	}
	ws, problems := src.Load()
	if ws != nil {
		for _, s := range ws.Sources {
			fmt.Fprintf(stdout, "%s: read as %s, %d server(s)\n", s.File, s.Dialect, s.Servers)
		}
		problems = append(problems, ws.EmptySources()...)
		problems = append(problems, upstream.MissingCommands(ws, os.Getenv("PATH"))...)
		problems = append(problems, upstreamauth.MissingLogins(ws)...)
	}
	errs, warns := listing.Problems(stdout, append(notes, problems...))
	switch {
	case errs > 0:
		fmt.Fprintf(stdout, "%d error(s), %d warning(s)\n", errs, warns)
		return 1
	case ws != nil:
		fmt.Fprintf(stdout, "ok: %d server(s), %d warning(s)\n", len(ws.Servers), warns)
	}
	return 0
}
