package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// source says where the config came from.
type source struct {
	paths []string // files; empty for the embedded demo
	demo  bool
}

// resolveConfig picks the files to load: the --config flags, else the first
// default path that exists, else the embedded demo (when allowed).
func resolveConfig(flags []string, allowDemo bool) (source, error) {
	if len(flags) > 0 {
		return source{paths: flags}, nil
	}
	for _, p := range config.DefaultPaths() {
		if _, err := os.Stat(p); err == nil {
			return source{paths: []string{p}}, nil
		}
	}
	if !allowDemo {
		return source{}, fmt.Errorf("no config: pass --config FILE or create %s", strings.Join(config.DefaultPaths(), " or "))
	}
	return source{demo: true}, nil
}

func (s source) load() (*config.Workspace, []config.Problem) {
	if s.demo {
		return config.LoadBytes("(built-in demo config)", demoConfig(), os.LookupEnv)
	}
	return config.Load(s.paths, os.LookupEnv)
}

// demoConfig runs the demo upstreams built into this binary: a stateless
// toolbox shared by every session and a stateful counter leased per session.
func demoConfig() []byte {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	quoted, _ := json.Marshal(strings.ReplaceAll(exe, "$", "$$"))
	return []byte(fmt.Sprintf(`version: 1
servers:
  demo:
    truely-stateless: true
    command: %[1]s
    args: [demo-server, tools]
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
`, quoted))
}

func printProblems(w interface{ Write([]byte) (int, error) }, problems []config.Problem) (errors, warnings int) {
	for _, p := range problems {
		fmt.Fprintln(w, p.String())
		if p.Severity == config.SeverityError {
			errors++
		} else {
			warnings++
		}
	}
	return errors, warnings
}
