package upstream

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// MissingCommands warns about stdio servers whose command cannot be found: on the PATH
// the server would get (its own env's, else the host's), or, for a path, relative to
// its cwd.
func MissingCommands(ws *config.Workspace, hostPath string) []config.Problem {
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
				Message: Scrub(s, fmt.Sprintf("%s; the server will fail to start: install it, or give its full path", err))})
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
