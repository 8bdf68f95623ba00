package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/redact"
)

// configEnvVar lists config files, separated like PATH, for clients that cannot pass
// --config (the Inspector, inspector-cli and mcp-cli take --config for themselves).
const configEnvVar = "MCP_AGGREGATOR_CONFIG"

// source says where the config came from. Every command finds it the same way.
type source struct {
	paths   []string // files; empty for the embedded demo
	demo    bool
	origin  string      // how the files were found, for messages
	notes   []string    // what the user should know about the choice
	secrets *redact.Set // learns every secret of what is loaded; may be nil
}

// resolveConfig picks the files to load: the --config flags, else the files
// MCP_AGGREGATOR_CONFIG lists, else the first default path that exists in the working
// directory, else the embedded demo. getenv reads the environment.
func resolveConfig(flags []string, getenv func(string) string) source {
	if len(flags) > 0 {
		return source{paths: flags, origin: "--config"}
	}
	if list := getenv(configEnvVar); strings.TrimSpace(list) != "" {
		var paths []string
		for _, p := range filepath.SplitList(list) {
			if p = strings.TrimSpace(p); p != "" {
				paths = append(paths, p)
			}
		}
		if len(paths) > 0 {
			return source{paths: paths, origin: configEnvVar}
		}
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
	defaults := strings.Join(config.DefaultPaths(), " and ")
	switch {
	case len(found) > 1:
		return source{paths: found[:1], origin: "default", notes: []string{fmt.Sprintf(
			"both %s exist in %s: using %s and ignoring %s; pass both with --config to layer them, or remove one",
			defaults, wd, found[0], strings.Join(found[1:], ", "))}}
	case len(found) == 1:
		return source{paths: found, origin: "default"}
	}
	return source{demo: true, origin: "demo", notes: []string{fmt.Sprintf(
		"no config found in %s (no --config, no %s, neither %s there): using the built-in demo config; "+
			"point at yours with --config FILE or %s=FILE (an IDE starts the aggregator in a directory of its own choosing, so use absolute paths)",
		wd, configEnvVar, strings.Join(config.DefaultPaths(), " nor "), configEnvVar)}}
}

// discover resolves the config for a long-running command and logs what the user
// should know about the choice.
func (c *common) discover(log *slog.Logger) source {
	src := resolveConfig(c.configs, os.Getenv)
	src.secrets = &c.secrets
	for _, n := range src.notes {
		log.Warn(n)
	}
	if !src.demo {
		abs := make([]string, len(src.paths))
		for i, p := range src.paths {
			abs[i], _ = filepath.Abs(p)
		}
		log.Info("config", "files", strings.Join(abs, string(filepath.ListSeparator)), "from", src.origin)
	}
	return src
}

// load reads the config; a file given but missing is an error.
func (s source) load() (*config.Workspace, []config.Problem) {
	var ws *config.Workspace
	var problems []config.Problem
	if s.demo {
		ws, problems = config.LoadBytes("(built-in demo config)", demoConfig(), os.LookupEnv)
	} else {
		ws, problems = config.Load(s.paths, os.LookupEnv)
	}
	s.learn(ws)
	return ws, problems
}

// loadLive reads the config of a running server: a file deleted meanwhile means no
// servers, not an error.
func (s source) loadLive() (*config.Workspace, []config.Problem) {
	if s.demo {
		return s.load()
	}
	ws, problems := config.LoadExisting(s.paths, os.LookupEnv)
	s.learn(ws)
	return ws, problems
}

// learn adds the workspace's secrets to the set every log line is scrubbed of.
func (s source) learn(ws *config.Workspace) {
	if s.secrets != nil && ws != nil {
		s.secrets.Add(ws.Secrets()...)
	}
}

// demoVars are the variables the demo config sets for its tools server; its env tool
// reports these and no other.
var demoVars = map[string]string{"DEMO_GREETING": "hello from the built-in demo config"}

// demoConfig runs the demo upstreams built into this binary: a stateless
// toolbox shared by every session and a stateful counter leased per session.
func demoConfig() []byte {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	quoted, _ := json.Marshal(strings.ReplaceAll(exe, "$", "$$"))
	names := make([]string, 0, len(demoVars))
	for k := range demoVars {
		names = append(names, k)
	}
	sort.Strings(names)
	env := make([]string, 0, len(names))
	for _, k := range names {
		q, _ := json.Marshal(demoVars[k])
		env = append(env, k+": "+string(q))
	}
	return []byte(fmt.Sprintf(`version: 1
servers:
  demo:
    truely-stateless: true
    command: %[1]s
    args: [demo-server, tools, --env, %[2]s]
    env: {%[3]s}
    transform:
      - prefix: demo_
  counter:
    command: %[1]s
    args: [demo-server, counter]
    transform:
      - prefix: counter_
    lease:
      idle_ttl: 30m
      prewarm: 1
`, quoted, strings.Join(names, ","), strings.Join(env, ", ")))
}

func printProblems(w interface{ Write([]byte) (int, error) }, problems []config.Problem) (errors, warnings int) {
	for _, p := range problems {
		// A problem may quote what an upstream said (an error, a name).
		fmt.Fprintln(w, inertLines(p.String()))
		if p.Severity == config.SeverityError {
			errors++
		} else {
			warnings++
		}
	}
	return errors, warnings
}
