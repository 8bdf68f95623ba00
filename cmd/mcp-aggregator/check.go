package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
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
	src := resolveConfig(c.configs, os.Getenv)
	var notes []config.Problem
	for _, n := range src.notes {
		notes = append(notes, config.Problem{Severity: config.SeverityWarning, Message: n})
	}
	ws, problems := src.load()
	if ws != nil {
		for _, s := range ws.Sources {
			fmt.Fprintf(stdout, "%s: read as %s, %d server(s)\n", s.File, s.Dialect, s.Servers)
		}
		problems = append(problems, emptySources(ws)...)
		problems = append(problems, missingCommands(ws, os.Getenv("PATH"))...)
		problems = append(problems, upstreamauth.MissingLogins(ws)...)
	}
	errs, warns := printProblems(stdout, append(notes, problems...))
	switch {
	case errs > 0:
		fmt.Fprintf(stdout, "%d error(s), %d warning(s)\n", errs, warns)
		return 1
	case ws != nil:
		fmt.Fprintf(stdout, "ok: %d server(s), %d warning(s)\n", len(ws.Servers), warns)
	}
	return 0
}

// emptySources warns about config files that define no server: a file of the right
// shape that is empty, or a client's config whose servers are all disabled, is more
// likely a mistake than an intent.
func emptySources(ws *config.Workspace) []config.Problem {
	var out []config.Problem
	for _, s := range ws.Sources {
		if s.Servers == 0 {
			out = append(out, config.Problem{Severity: config.SeverityWarning, File: s.File,
				Message: fmt.Sprintf("defines no servers (read as %s); add servers, or check that this is the file you meant", s.Dialect)})
		}
	}
	return out
}

// missingCommands warns about stdio servers whose command cannot be found: on the PATH
// the server would get (its own env's, else the host's), or, for a path, relative to
// its cwd.
func missingCommands(ws *config.Workspace, hostPath string) []config.Problem {
	var out []config.Problem
	// Servers mostly share a few commands (npx, uvx, node): each is looked up
	// once, not once per server and directory of the PATH.
	type lookup struct{ command, cwd, path string }
	found := map[lookup]error{}
	for _, s := range ws.Servers {
		if s.Transport != config.TransportStdio || s.Command == "" {
			continue
		}
		path := hostPath
		if p, ok := s.Env["PATH"]; ok {
			path = p
		}
		key := lookup{s.Command, s.Cwd, path}
		err, seen := found[key]
		if !seen {
			_, err = findCommand(s.Command, s.Cwd, path)
			found[key] = err
		}
		if err != nil {
			// The command may hold text from the environment: scrubbed as
			// everything said about a server is.
			out = append(out, config.Problem{Severity: config.SeverityWarning, File: s.File, Line: s.Line, Server: s.ID, Field: "command",
				Message: upstream.Scrub(s, fmt.Sprintf("%s; the server will fail to start: install it, or give its full path", err))})
		}
	}
	return out
}

// findCommand resolves a command as starting the server would.
func findCommand(command, cwd, path string) (string, error) {
	if strings.ContainsRune(command, filepath.Separator) || strings.ContainsRune(command, '/') {
		p := command
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if executable(p) {
			return p, nil
		}
		return "", fmt.Errorf("%q is not an executable file", p)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		if p := filepath.Join(dir, command); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q is not found on PATH", command)
}
