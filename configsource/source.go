package configsource

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/demo"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
)

// EnvVar lists config files, separated like PATH, for clients that cannot pass
// --config (the Inspector, inspector-cli and mcp-cli take --config for themselves).
const EnvVar = "MCP_AGGREGATOR_CONFIG"

// Origins of a Source: how its files were found.
const (
	OriginFlags   = "--config"
	OriginEnv     = EnvVar
	OriginDefault = "default"
	OriginDemo    = "demo"
)

// demoName is the file name problems of the built-in demo config give.
const demoName = "(built-in demo config)"

// Source says where the config comes from.
type Source struct {
	// Paths are the files to read, as given; empty for the demo config.
	Paths []string
	// Demo is set when no config was found: the built-in demo config is read.
	Demo bool
	// Origin says how the files were found (one of the Origin constants),
	// for messages.
	Origin string
	// Notes are what the user should know about the choice: a default file
	// ignored, the demo config used.
	Notes []string
	// Secrets, if not nil, learns every secret of each workspace loaded, so
	// that no log line shows one.
	Secrets *redact.Set
}

// Resolve picks the files to load: the --config flags, else the files EnvVar
// lists, else the first default path (config.DefaultPaths) that exists in
// the working directory, else the built-in demo config. getenv reads the
// environment.
func Resolve(flags []string, getenv func(string) string) Source {
	if len(flags) > 0 {
		return Source{Paths: flags, Origin: OriginFlags}
	}
	if paths := splitList(getenv(EnvVar)); len(paths) > 0 {
		return Source{Paths: paths, Origin: OriginEnv}
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = "."
	}
	var found []string
	for _, p := range config.DefaultPaths() {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			found = append(found, p)
		}
	}
	switch {
	case len(found) > 1:
		return Source{Paths: found[:1], Origin: OriginDefault, Notes: []string{fmt.Sprintf(
			"both %s exist in %s: using %s and ignoring %s; pass both with --config to layer them, or remove one",
			strings.Join(config.DefaultPaths(), " and "), wd, found[0], strings.Join(found[1:], ", "))}}
	case len(found) == 1:
		return Source{Paths: found, Origin: OriginDefault}
	}
	return Source{Demo: true, Origin: OriginDemo, Notes: []string{fmt.Sprintf(
		"no config found in %s (no --config, no %s, neither %s there): using the built-in demo config; "+
			"point at yours with --config FILE or %s=FILE (an IDE starts the aggregator in a directory of its own choosing, so use absolute paths)",
		wd, EnvVar, strings.Join(config.DefaultPaths(), " nor "), EnvVar)}}
}

// splitList splits a list of files separated like PATH, dropping the blanks
// around each and the empty entries.
func splitList(list string) []string {
	var paths []string
	for _, p := range filepath.SplitList(list) {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// Log tells a long-running command's log what the user should know about the
// choice: each note as a warning, then the files read (absolute) and how
// they were found.
func (s Source) Log(log *slog.Logger) {
	for _, n := range s.Notes {
		log.Warn(n)
	}
	if s.Demo {
		return
	}
	abs := make([]string, len(s.Paths))
	for i, p := range s.Paths {
		abs[i], _ = filepath.Abs(p)
	}
	log.Info("config", "files", strings.Join(abs, string(filepath.ListSeparator)), "from", s.Origin)
}

// Watched are the files a serving aggregator watches: the Paths, none for the
// demo config.
func (s Source) Watched() []string {
	if s.Demo {
		return nil
	}
	return s.Paths
}

// Load reads the config; a file given but missing is an error.
func (s Source) Load() (*config.Workspace, []config.Problem) {
	var ws *config.Workspace
	var problems []config.Problem
	if s.Demo {
		ws, problems = config.LoadBytes(demoName, demo.Config(executable()), os.LookupEnv)
	} else {
		ws, problems = config.Load(s.Paths, os.LookupEnv)
	}
	s.learn(ws)
	return ws, problems
}

// LoadLive reads the config of a running server: a file deleted meanwhile
// means no servers, not an error.
func (s Source) LoadLive() (*config.Workspace, []config.Problem) {
	if s.Demo {
		return s.Load()
	}
	ws, problems := config.LoadExisting(s.Paths, os.LookupEnv)
	s.learn(ws)
	return ws, problems
}

// learn adds the workspace's secrets to the set every log line is scrubbed of.
func (s Source) learn(ws *config.Workspace) {
	if s.Secrets != nil && ws != nil {
		s.Secrets.Add(ws.Secrets()...)
	}
}

// executable is the path of the running binary, which serves the demo
// servers the demo config runs.
func executable() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}
